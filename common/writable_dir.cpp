#include "common/writable_dir.hpp"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster {

std::string unwritable_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  auto at = std::filesystem::absolute(dir, ec);
  while (at.has_relative_path() && !std::filesystem::exists(at, ec)) at = at.parent_path();
  if (!std::filesystem::is_directory(at, ec))
    return fmt::format("{} is not a directory", at.string());
  // /proc, /sys: a file system that stores nothing (no blocks), where no folder can be made
  struct ::statvfs vfs {};
  if (at != dir && ::statvfs(at.c_str(), &vfs) == 0 && vfs.f_blocks == 0)
    return fmt::format(
        "{} (where it would be made) is on a file system that stores nothing, such as /proc or "
        "/sys",
        at.string());
  if (::access(at.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{}{} cannot be written: {}", at.string(),
                       at == dir ? "" : " (where it would be made)", std::strerror(errno));
  return {};
}

}  // namespace muster

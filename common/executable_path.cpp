#include "common/executable_path.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace muster {

namespace {

bool executable_file(const std::filesystem::path& file) {
  if (::access(file.c_str(), X_OK) != 0) return false;
  std::error_code ec;
  if (!std::filesystem::is_directory(file, ec)) return true;
  errno = EISDIR;
  return false;
}

}  // namespace

std::optional<std::filesystem::path> executable_path(const std::string& command,
                                                     std::string_view path,
                                                     std::string_view default_path) {
  if (command.empty()) return std::nullopt;
  if (command.find('/') != std::string::npos)
    return executable_file(command) ? std::optional<std::filesystem::path>(command) : std::nullopt;
  std::string_view dirs = path.empty() ? default_path : path;
  for (std::size_t begin = 0; begin <= dirs.size();) {
    const auto end = std::min(dirs.find(':', begin), dirs.size());
    std::filesystem::path dir(dirs.substr(begin, end - begin));
    if (dir.empty()) dir = ".";
    if (auto candidate = dir / command; executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return std::nullopt;
}

}  // namespace muster

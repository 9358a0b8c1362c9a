// The launchers' checks of a muster-train job: see engine_precheck.hpp.
#include "launcher/engine_precheck.hpp"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "common/train_limits.hpp"
#include "engine/data/job_documents.hpp"
#include "launcher/launch_policy.hpp"

namespace muster::launcher {
namespace {

// Why muster-train could not save under checkpoint directory `dir` (made when missing), or "".
std::string unwritable(const std::filesystem::path& dir) {
  std::error_code ec;
  auto at = std::filesystem::absolute(dir, ec);
  while (at.has_relative_path() && !std::filesystem::exists(at, ec)) at = at.parent_path();
  if (!std::filesystem::is_directory(at, ec))
    return fmt::format("{} is not a directory", at.string());
  // /proc, /sys: a file system that stores nothing (no blocks), where no folder can be made
  struct ::statvfs vfs {};
  if (at != dir && ::statvfs(at.c_str(), &vfs) == 0 && vfs.f_blocks == 0)
    return fmt::format(
        "{} (where it would be made) is on a file system that stores nothing, "
        "such as /proc or /sys",
        at.string());
  if (::access(at.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{}{} cannot be written: {}", at.string(),
                       at == dir ? "" : " (where it would be made)", std::strerror(errno));
  return {};
}

}  // namespace

void check_engine_job(const job_config& config, const std::vector<std::string>& argv) {
  if (!runs_builtin_engine(argv)) return;
  check_train_limits(config);
  engine::data::open_job_documents(config);
  const auto& load = config.checkpoint.load;
  std::error_code ec;
  MUSTER_CHECK(load.empty() || std::filesystem::is_directory(load, ec), errc::invalid_input,
               "checkpoint.load = {}: {}; name a checkpoint directory (step-N) or a Hugging Face "
               "model directory, or leave it empty to resume from the newest under "
               "checkpoint.dir",
               load, std::filesystem::exists(load, ec) ? "not a directory" : "does not exist");
  // found now, not at the first save, checkpoint.interval steps in
  if (const auto& dir = config.checkpoint.dir; !dir.empty())  // signalled saves go there too
    if (const auto why = unwritable(dir); !why.empty())
      MUSTER_THROW(errc::invalid_input,
                   "checkpoint.dir = {}: {}; muster-train could save no checkpoint there: "
                   "choose a folder this user can write, or leave it empty for the run "
                   "directory's",
                   dir, why);
}

}  // namespace muster::launcher

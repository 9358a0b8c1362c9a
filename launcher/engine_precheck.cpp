// The launchers' checks of a muster-train job: see engine_precheck.hpp.
#include "launcher/engine_precheck.hpp"

#include <filesystem>

#include "common/error.hpp"
#include "common/train_limits.hpp"
#include "engine/data/job_documents.hpp"
#include "launcher/launch_policy.hpp"

namespace muster::launcher {

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
}

}  // namespace muster::launcher

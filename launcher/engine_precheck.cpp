// The launchers' checks of a muster-train job: see engine_precheck.hpp.
#include "launcher/engine_precheck.hpp"

#include "common/train_limits.hpp"
#include "engine/data/job_documents.hpp"
#include "launcher/launch_policy.hpp"

namespace muster::launcher {

void check_engine_job(const job_config& config, const std::vector<std::string>& argv) {
  if (!runs_builtin_engine(argv)) return;
  check_train_limits(config);
  engine::data::open_job_documents(config);
}

}  // namespace muster::launcher

#include "common/train_limits.hpp"

#include "common/error.hpp"

namespace muster {

void check_train_limits(const job_config& config) {
  const auto& p = config.parallel;
  MUSTER_CHECK(p.tensor == 1 && p.pipeline == 1 && p.context == 1, errc::invalid_input,
               "muster-train runs data and expert parallel only for now: parallel.tensor, "
               "pipeline and context must be 1 (found {}, {}, {}); set them to 1, or run a "
               "program of your own after --",
               p.tensor, p.pipeline, p.context);
}

}  // namespace muster

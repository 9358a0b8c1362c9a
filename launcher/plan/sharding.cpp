// parallel.sharding's values: see sharding.hpp.
#include "launcher/plan/sharding.hpp"

#include "common/error.hpp"

namespace muster::launcher::plan {

sharding parse_sharding(const std::string& value) {
  if (value == "no_shard") return sharding::no_shard;
  if (value == "optim") return sharding::optim;
  if (value == "optim_grads") return sharding::optim_grads;
  if (value == "optim_grads_params") return sharding::optim_grads_params;
  MUSTER_THROW(errc::config,
               "parallel.sharding: invalid value: {}; use no_shard, optim, optim_grads or "
               "optim_grads_params",
               value);
}

}  // namespace muster::launcher::plan

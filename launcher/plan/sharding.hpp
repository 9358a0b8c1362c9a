// parallel.sharding: which of a unit's parameters, gradients and optimizer state the
// data-parallel ranks divide among themselves (Megatron-FSDP's names: ZeRO-1/2/3). The planner
// estimates with it (memory_estimate.hpp) and the engine shards by it (engine/parallel/).
#pragma once

#include <string>

namespace muster::launcher::plan {

enum class sharding { no_shard, optim, optim_grads, optim_grads_params };

// parallel.sharding's value; throws errc::config naming the key and the choices otherwise.
sharding parse_sharding(const std::string& value);

}  // namespace muster::launcher::plan

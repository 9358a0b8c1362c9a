// The names Megatron-LM and torchrun give job keys (--tensor-model-parallel-size for
// parallel.tensor, --train-iters for train.steps), so that a job file or command line written
// with them gets muster's key named. Names that equal muster's own key name in another section
// (num_experts) need no entry: the loader finds those itself. docs/coming-from.md has the full
// mapping, with the flags that have no equivalent.
#pragma once

#include <span>

#include "common/config_load.hpp"

namespace muster {

std::span<const config::other_name> job_other_names();

}  // namespace muster

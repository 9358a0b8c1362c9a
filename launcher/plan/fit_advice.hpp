// When a plan does not fit the GPU (or fits with less than kTightMargin to spare: then "fits"
// below means "fits with that room"): the changes that would make it fit, tried one at a time in
// the order the Megatron / Megatron-FSDP troubleshooting guides give them, each with its new
// estimate:
//   1. a smaller micro batch (global batch kept by more accumulation), or shorter packs
//   2. activation recompute: selective, then full
//   3. a stronger sharding strategy: optim -> optim_grads -> optim_grads_params
//   4. more context parallelism, or sequence parallelism when TP > 1
//   5. more expert parallelism, or more pipeline stages
// Every change is a list of `section.key=value` overrides the user can paste on the command
// line, applied through the same loader, so it is checked like user input. Layout changes keep
// the world and the global batch; a change that makes the plan invalid is not offered.
// Not here: the estimate itself (memory_estimate.hpp).
#pragma once

#include <vector>

#include "launcher/plan/job_plan.hpp"

namespace muster::launcher::plan {

// The changes, single ones first in the order above (those that fit and those that only help),
// then, when no single change fits, the smallest combination in that order that does.
std::vector<fit_change> rank_fixes(const job_plan& plan, const config::sources& where);

}  // namespace muster::launcher::plan

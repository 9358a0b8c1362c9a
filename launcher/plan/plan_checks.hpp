// The rules a layout must satisfy against the model and the batch, as Megatron-Core enforces
// them: layers vs PP x VPP, experts vs EP, heads and query groups vs TP, FFN sizes vs TP/ETP,
// sequence length vs 2 x CP (and vs TP under sequence parallelism), global batch vs micro batch
// x DP. Each problem names the keys and numbers and proposes the nearest values that work.
// Not here: the layout's own consistency (layout_resolve.hpp), memory (memory_estimate.hpp).
#pragma once

#include <string>
#include <vector>

#include "common/config_schema.hpp"
#include "common/job_config.hpp"
#include "launcher/plan/layout.hpp"

namespace muster::launcher::plan {

struct check_report {
  std::vector<std::string> errors;    // the plan cannot run; every one found, not just the first
  std::vector<std::string> warnings;  // it runs, but slower or not as the user likely meant
};

// Checks `config` against `layout`; messages name the places in `where`. Without `sizes_fit`
// (the layout's sizes do not divide the world: resolve_layout's errors say so), the model's
// rules only, each proposing values that split the model (the world has its own message), and
// not the batch against the data-parallel size.
check_report check_plan(const job_config& config, const layout& layout,
                        const config::sources& where, bool sizes_fit = true);

// Throws errc::config with every error of `report`, one per line; does nothing without errors.
void throw_if_errors(const check_report& report);

}  // namespace muster::launcher::plan

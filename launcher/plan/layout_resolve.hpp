// From the job file's [parallel] section and a world size to a checked layout (layout.hpp):
// reads parallel.allocation or the sizes, derives the data-parallel sizes, and checks that both
// meshes cover the world. Every error names the key (or the allocation string), the numbers, and
// the nearest values that would work.
// Not here: checks against the model and the batch (plan_checks.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/config_schema.hpp"
#include "common/job_config.hpp"
#include "launcher/plan/layout.hpp"

namespace muster::launcher::plan {

// The number of ranks and where it came from, for messages ("--world 32", "Slurm step: 4 nodes
// x 8 tasks").
struct world_size {
  int ranks = 0;
  std::string source;
};

// Resolves the layout. Without a world, the world is the product of the sizes when the
// data-parallel size is given (parallel.data or 'd' in the allocation); otherwise it is an error
// that says how to give one. Throws errc::config.
layout resolve_layout(const parallel_section& parallel, const std::optional<world_size>& world,
                      const config::sources& where);

// The same, adding the sizes' errors against the world to `errors` rather than throwing them
// (a world that cannot be known still throws): the layout is then the sizes as given, the
// data-parallel sizes rounded down (at least 1), for checks against the model that do not read
// them (check_plan without the batch), so that every broken rule is listed at once. With
// `model`, the sizes each error proposes also split it (heads and query groups over tensor,
// layers over pipeline, experts over expert, their FFN over expert tensor), so that the values
// proposed break no other rule.
layout resolve_layout(const parallel_section& parallel, const std::optional<world_size>& world,
                      const config::sources& where, std::vector<std::string>& errors,
                      const model_section* model = nullptr);

}  // namespace muster::launcher::plan

// From the job file's [parallel] section and a world size to a checked layout (layout.hpp):
// reads parallel.allocation or the sizes, derives the data-parallel sizes, and checks that both
// meshes cover the world. Every error names the key (or the allocation string), the numbers, and
// the nearest values that would work.
// Not here: checks against the model and the batch (plan_checks.hpp).
#pragma once

#include <optional>
#include <string>

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

}  // namespace muster::launcher::plan

// The whole plan of one job: the resolved layout and its rank groups, the batch arithmetic, the
// per-GPU memory estimate and, when it does not fit (or only just), the ranked changes that would
// make it fit (or give it room).
// `muster plan` prints it; `muster launch` and the engine take their layout and groups from it.
// Not here: where the world size comes from (the CLI reads flags or the Slurm step), printing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/job_config.hpp"
#include "launcher/plan/batch_plan.hpp"
#include "launcher/plan/layout.hpp"
#include "launcher/plan/layout_resolve.hpp"
#include "launcher/plan/memory_estimate.hpp"
#include "launcher/plan/model_params.hpp"
#include "launcher/plan/rank_groups.hpp"

namespace muster::launcher::plan {

// What the plan is made for, besides the job file.
struct plan_request {
  std::optional<world_size> world;  // unset: the product of the parallel sizes (needs a DP size)
  int gpus_per_node = 8;            // ranks per node, for node placement
  std::string gpus_per_node_source = "assumed; pass --gpus-per-node";
  memory_options memory;
  std::string gpu_memory_source = "assumed H100; pass --gpu-memory";
};

// One change that would make the plan fit (a tight plan: leave it room), and its new estimate.
struct fit_change {
  std::string what;                    // "smaller micro batch", "full recompute", ...
  std::vector<std::string> overrides;  // section.key=value, ready for the command line
  std::int64_t total_bytes = 0;        // the new worst-stage estimate
  bool fits = false;                   // it fits
  bool roomy = false;                  // it fits with kTightMargin spare (not tight_fit)
};

// The plan's estimate with one setting changed, for the comparison tables.
struct variant_estimate {
  std::string setting;        // "parallel.sharding=optim"
  stage_memory worst;         // the worst stage under that setting
  bool fits = false;
};

struct job_plan {
  job_config config;            // as loaded (the job file's values)
  plan::layout layout;
  rank_groups groups;
  batch_plan batch;
  model_params params;
  std::int64_t flops_per_token = 0;  // training FLOPs per token (for MFU)
  memory_estimate memory;
  plan_request request;
  std::vector<std::string> warnings;  // it runs, but not as well as it could
  std::vector<std::string> notes;     // worth knowing: other tools' numbers, assumptions
  std::vector<fit_change> fixes;      // when it does not fit, or fits tightly (tight_fit):
                                      // single changes in the guides' order, then one
                                      // combination when none fits alone
  // The same plan under each parallel.sharding, each train.recompute, and each precision
  // (train.precision with train.grad_reduce_dtype), everything else as planned.
  std::vector<variant_estimate> by_sharding;
  std::vector<variant_estimate> by_recompute;
  std::vector<variant_estimate> by_precision;

  bool fits() const { return memory.fits(); }
};

// Resolves the layout and checks it against every rule (layout, model, batch, Megatron's order
// checks); throws errc::config with every problem, or returns the layout and puts the rules it
// only bends into `warnings`.
layout checked_layout(const job_config& config, const config::sources& where,
                      const plan_request& request, std::vector<std::string>& warnings);

// A plan that fits by less than this share of the GPU is warned about, and gets the changes
// that would make room: fragmentation and the allocator's caching routinely take a few percent
// more than any estimate.
inline constexpr double kTightMargin = 0.05;

// The share of a GPU of `gpu_memory_bytes` that `total_bytes` leaves (negative: over).
double spare_share(std::int64_t total_bytes, std::int64_t gpu_memory_bytes);

// Whether `m` fits with less than kTightMargin of the GPU to spare.
bool tight_fit(const memory_estimate& m);

// Resolves, checks and estimates. Throws errc::config with every problem of an invalid plan
// (layout, model and batch rules), naming the places in `where`.
job_plan make_plan(const job_config& config, const config::sources& where,
                   const plan_request& request);

}  // namespace muster::launcher::plan

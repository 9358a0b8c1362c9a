// Batch arithmetic of one optimizer step: global_batch = micro_batch * grad_accum * DP, the
// tokens it holds, and how the pipeline sees the micro-batches.
// Not here: checking the numbers against the layout (plan_checks.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "common/job_config.hpp"
#include "launcher/plan/layout.hpp"

namespace muster::launcher::plan {

struct batch_plan {
  int micro_batch_size = 1;         // rows per rank per forward
  int grad_accum_steps = 1;         // micro-batches per step per DP rank (= pipeline micro-batches)
  int global_batch_size = 1;        // rows per step over all DP ranks
  int row_tokens = 1;               // tokens per row: train.max_tokens_per_pack, or seq_length
  bool packed = false;              // rows are packs of documents
  std::int64_t tokens_per_step = 0;        // global_batch_size * row_tokens
  std::int64_t tokens_per_microbatch = 0;  // micro_batch_size * row_tokens (before CP)
  // What LLaMA-Factory's MCA note computes: (world // pp // tp // ep // cp) * micro * accum.
  // It divides the world by EP as well; equal to global_batch_size when EP == 1.
  int llamafactory_global_batch_size = 1;
};

// The batch of one step under `layout`. train.global_batch_size > 0 derives grad_accum_steps;
// callers check divisibility first (check_plan), this only computes.
batch_plan make_batch_plan(const train_section& train, const layout& layout);

}  // namespace muster::launcher::plan

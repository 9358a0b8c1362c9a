// Batch arithmetic: see batch_plan.hpp.
#include "launcher/plan/batch_plan.hpp"

namespace muster::launcher::plan {

batch_plan make_batch_plan(const train_section& train, const layout& layout) {
  batch_plan b;
  b.micro_batch_size = train.micro_batch_size;
  const int rows_per_accum = train.micro_batch_size * layout.dp();
  if (train.global_batch_size > 0) {
    b.global_batch_size = train.global_batch_size;
    b.grad_accum_steps = train.global_batch_size / rows_per_accum;
  } else {
    b.grad_accum_steps = train.grad_accum_steps;
    b.global_batch_size = rows_per_accum * train.grad_accum_steps;
  }
  b.packed = train.max_tokens_per_pack > 0;
  b.row_tokens = b.packed ? train.max_tokens_per_pack : train.seq_length;
  b.tokens_per_step = static_cast<std::int64_t>(b.global_batch_size) * b.row_tokens;
  b.tokens_per_microbatch = static_cast<std::int64_t>(b.micro_batch_size) * b.row_tokens;
  const int lf_dp = layout.world / layout.pp() / layout.tp() / layout.ep() / layout.cp();
  b.llamafactory_global_batch_size = lf_dp * b.micro_batch_size * b.grad_accum_steps;
  return b;
}

}  // namespace muster::launcher::plan

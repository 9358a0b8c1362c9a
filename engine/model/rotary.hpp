// Rotary position embedding (Su et al. 2021) in Hugging Face's layout: the head's first and
// second halves are the two coordinates of each rotated pair (rotate_half), so checkpoints of
// Llama, Qwen and Mixtral load without permuting q/k weights. Positions are given per token,
// so packed documents each start again at 0.
#pragma once

#include <torch/torch.h>

namespace muster::engine::model {

struct rotary_tables {
  torch::Tensor cos;  // (batch, seq, head_dim)
  torch::Tensor sin;  // (batch, seq, head_dim)
};

// The tables for `positions` (batch, seq), int64; in `dtype`.
rotary_tables make_rotary(const torch::Tensor& positions, std::int64_t head_dim, double theta,
                          torch::Dtype dtype);

// x is (batch, heads, seq, head_dim); returns x rotated by its tokens' positions.
torch::Tensor apply_rotary(const torch::Tensor& x, const rotary_tables& rope);

}  // namespace muster::engine::model

// The core of causal self-attention (scores, softmax, the product with v) as one autograd
// function with its own backward, for grouped key/value heads and packed rows.
// Queries go in blocks of rows, and a block is scored only against the keys up to its last
// position: about half of the scores, softmax and their backward are skipped at long rows.
// The backward writes each block's gradients into one buffer per input, where the generic
// autograd of the same code would allocate a zeroed full-size gradient per slice and add
// them up (a third of the attention's time at 256 tokens).
// Not flash attention: a block's probabilities are kept for the backward, as autograd would.
// On a GPU with LibTorch 2.x it is PyTorch's scaled_dot_product_attention instead (the
// memory-efficient kernel, with the mask), and on the CPU in fp32 the kernel of
// muster/kernels/causal_attention.hpp.
#pragma once

#include <torch/torch.h>

namespace muster::engine::model {

// q is (batch, heads, seq, head_dim); k and v are (batch, kv_heads, seq, head_dim), heads a
// multiple of kv_heads (query head h reads kv head h / (heads / kv_heads), as Hugging Face's
// repeat_kv, without copying k and v). `allowed` is (batch, 1, seq, seq) bool from
// attention_mask(). Scores are scaled by 1/sqrt(head_dim); softmax runs in fp32 at least.
// Returns (batch, heads, seq, head_dim) in the dtype the products run in: autocast's where it
// is on, else q, k and v's promoted; here a transposed view of (batch, seq, heads, head_dim)
// memory, so the output projection reads it without a copy (scaled_dot_product_attention's
// layout is its own).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& allowed);

}  // namespace muster::engine::model

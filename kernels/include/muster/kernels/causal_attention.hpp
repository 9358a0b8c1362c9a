// The core of causal self-attention over packed rows, softmax(q k^T * scale) v, for grouped
// key/value heads, forward and backward. Raw pointers and sizes; no CUDA or torch types.
//
// Query rows go in blocks of kCausalBlock positions, all the query heads of one kv head
// together, and a block is scored only against the keys its rows may see: from the first
// document start among its rows to its last position (about half of a long row's scores, more
// where documents are short). The products are gemm() calls (gemm.hpp) on those blocks; the softmax
// and its backward are one pass over a row each. The probabilities are kept for the backward
// (not flash attention), in blocks: causal_attention_saved_floats() says how many.
#pragma once

#include <cstdint>

namespace muster::kernels::cpu {

// Query positions per block (32 was slower at 256-token rows: smaller products). A row shorter
// than two blocks is one block.
inline constexpr std::int64_t kCausalBlock = 64;

struct attention_dims {
  std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
};

// Every tensor is token-major and contiguous, as the projections lay them out: q, out, grad_out
// and grad_q are (batch, seq, heads, head_dim), k, v, grad_k and grad_v (batch, seq, kv_heads,
// head_dim). Query head h reads kv head h / (heads / kv_heads) (Hugging Face's repeat_kv).
// first_key is (batch, seq): query i attends to keys first_key[i] .. i of its row (the start of
// its document; 0 for plain causal rows), so 0 <= first_key[i] <= i.

// The floats of `probs` for these dims and keys.
std::int64_t causal_attention_saved_floats(const attention_dims& d, const std::int64_t* first_key);

// out = softmax(q k^T * scale, masked) v; the probabilities go to `probs` for the backward.
// fp32 throughout; exp to about 2 ulp; sums in a fixed order, so results are bitwise
// repeatable (given a deterministic BLAS).
void causal_attention_forward(const attention_dims& d, const float* q, const float* k,
                              const float* v, const std::int64_t* first_key, float scale,
                              float* out, float* probs);

// Given grad_out = dL/dout and the forward's probs: grad_q, grad_k, grad_v, each overwritten.
void causal_attention_backward(const attention_dims& d, const float* q, const float* k,
                               const float* v, const std::int64_t* first_key, float scale,
                               const float* probs, const float* grad_out, float* grad_q,
                               float* grad_k, float* grad_v);

}  // namespace muster::kernels::cpu

// The attention core over the CPU kernel (kernels/.../causal_attention.hpp) as an autograd
// function: fp32 tensors on the CPU, token-major, each query attending to a contiguous range of
// keys ending at itself (causal, inside its document).
#pragma once

#include <optional>

#include <torch/torch.h>

namespace muster::engine::ops {

// first_key (batch, seq) int64 from an attention mask (batch, 1, seq, seq) bool when every
// query's allowed keys are one range ending at itself (what a causal mask inside packed
// documents is); nullopt for any other mask.
std::optional<torch::Tensor> causal_key_ranges(const torch::Tensor& allowed);

// Whether causal_attention_cpu takes these: fp32 on the CPU, (batch, seq, heads, head_dim)
// and (batch, seq, kv_heads, head_dim) with heads a multiple of kv_heads (any strides; they
// are made contiguous).
bool causal_attention_cpu_takes(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v);

// softmax(q k^T / sqrt(head_dim)) v over keys first_key[i] .. i for query i; query head h
// reads kv head h / (heads / kv_heads). Returns (batch, seq, heads, head_dim), contiguous.
torch::Tensor causal_attention_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& first_key);

}  // namespace muster::engine::ops

// Causal self-attention with grouped key/value heads (GQA), rotary positions and, for Qwen3,
// an RMSNorm on each head's query and key before the rotation. Packed rows: a token attends
// only to earlier tokens of its own document (same segment id).
// Parameters as Hugging Face names them: q_proj (heads*head_dim x hidden), k_proj, v_proj
// (kv_heads*head_dim x hidden; biases with attention_bias), o_proj (hidden x heads*head_dim),
// q_norm, k_norm (head_dim).
// With model_config::recompute_attention_core (train.recompute = selective) the core (scores,
// probabilities, their product with v) is recomputed in backward (model/recompute.hpp).
#pragma once

#include <memory>

#include <torch/torch.h>

#include "engine/model/model_config.hpp"
#include "engine/model/rms_norm.hpp"
#include "engine/model/rotary.hpp"

namespace muster::engine::model {

// True where query token i may attend to key token j: j <= i and both in one document.
// segments is (batch, seq), int64; returns (batch, 1, seq, seq) bool.
torch::Tensor attention_mask(const torch::Tensor& segments);

class attention : public torch::nn::Module {
 public:
  explicit attention(const model_config& c);
  // x is (batch, seq, hidden), mask from attention_mask(); returns (batch, seq, hidden).
  torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope,
                        const torch::Tensor& mask);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  std::shared_ptr<rms_norm> q_norm, k_norm;  // null without qk_norm

 private:
  std::int64_t num_heads_, num_kv_heads_, head_dim_;
  bool recompute_core_;  // train.recompute = selective
};

}  // namespace muster::engine::model

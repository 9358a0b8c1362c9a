// The decoder-only transformer: token embedding, layers of (RMSNorm, attention, residual,
// RMSNorm, dense SwiGLU or MoE block, residual), a final RMSNorm and the output head (its own,
// or the embedding's transposed with tie_embeddings).
// Parameter names are Hugging Face's without the leading "model." (embed_tokens.weight,
// layers.<i>.self_attn.q_proj.weight, layers.<i>.mlp.experts.<e>.up_proj.weight, norm.weight,
// lm_head.weight), so checkpoints map one to one.
// Inputs are packed rows: tokens, positions (restarting at 0 in each document) and segment
// ids (the document of each token within its row), all (batch, seq) int64.
// Not here: initialisation (init.hpp), sharding (engine/parallel/).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/model/attention.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/moe_block.hpp"
#include "engine/model/rms_norm.hpp"
#include "engine/model/swiglu.hpp"

namespace muster::engine::model {

// What the MoE layers add to the loss, summed over layers (each already times its coefficient).
struct moe_losses {
  torch::Tensor aux;
  torch::Tensor z;
};

class decoder_layer : public torch::nn::Module {
 public:
  decoder_layer(const model_config& c, std::int64_t index);
  // x is (batch, seq, hidden); adds this layer's router losses to `losses`.
  torch::Tensor forward(const torch::Tensor& x, const rotary_tables& rope,
                        const torch::Tensor& mask, moe_losses& losses);

  std::shared_ptr<rms_norm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<attention> self_attn;
  std::shared_ptr<swiglu> mlp;         // a dense layer
  std::shared_ptr<moe_block> moe;      // an MoE layer (registered as "mlp" too)
};

struct transformer_output {
  torch::Tensor logits;  // (batch, seq, vocab), in the compute dtype
  moe_losses losses;     // scalars; 0 for a dense model
};

class transformer : public torch::nn::Module {
 public:
  explicit transformer(const model_config& c);
  transformer_output forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                             const torch::Tensor& segments);
  // The pieces forward() is made of, for a caller that runs the layers itself (sharding,
  // engine/parallel/): the embedding lookup; the rotary tables and attention mask of a batch;
  // the final norm and the output head.
  torch::Tensor embed(const torch::Tensor& tokens);
  struct batch_context {
    rotary_tables rope;
    torch::Tensor mask;
  };
  batch_context context(const torch::Tensor& positions, const torch::Tensor& segments,
                        torch::ScalarType dtype) const;
  torch::Tensor head(const torch::Tensor& x);
  const model_config& config() const { return config_; }
  // The ranks every MoE layer takes its router losses over (moe_block.hpp).
  void set_router_group(const router_group& group);
  // The expert-parallel group every MoE layer dispatches over (model_config.ep_size > 1).
  void set_expert_group(const expert_group& group);

  torch::nn::Embedding embed_tokens{nullptr};
  std::vector<std::shared_ptr<decoder_layer>> layers;
  std::shared_ptr<rms_norm> norm;
  torch::nn::Linear lm_head{nullptr};  // null with tie_embeddings

 private:
  model_config config_;
};

// The language-model loss summed over tokens (not averaged: the caller divides by the global
// token count, so padding and packing never bias it). logits (batch, seq, vocab); labels
// (batch, seq) int64, -100 where no loss is taken. Computed in fp32.
torch::Tensor token_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels);

}  // namespace muster::engine::model

// Tiny models and packed batches for the engine's model tests.
#pragma once

#include <torch/torch.h>

#include "engine/model/model_config.hpp"

namespace muster::test {

// A 2-layer model small enough for finite differences: hidden 16, 4 heads over 2 kv heads,
// vocab 32; layer 1 is MoE (4 experts, top 2) when `moe`.
inline engine::model::model_config tiny_config(bool moe = true) {
  engine::model::model_config c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.ffn_hidden_size = 24;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.qk_norm = true;
  c.num_experts = moe ? 4 : 0;
  c.moe_ffn_hidden_size = 8;
  c.topk = 2;
  c.aux_loss_coeff = 1e-2;
  c.z_loss_coeff = 1e-3;
  c.moe_layers = {false, moe};
  return c;
}

}  // namespace muster::test

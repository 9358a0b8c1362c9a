// The sizes of published models, set field by field from their Hugging Face config.json, for
// the planner's tests (the config.json files themselves are in etc/examples/hf-configs/).
#pragma once

#include "common/job_config.hpp"

namespace muster::test {

// Qwen/Qwen3-30B-A3B config.json.
inline muster::model_section qwen3_30b_a3b() {
  muster::model_section m;
  m.num_layers = 48;
  m.hidden_size = 2048;
  m.ffn_hidden_size = 6144;
  m.num_attention_heads = 32;
  m.num_query_groups = 4;
  m.head_dim = 128;
  m.vocab_size = 151936;
  m.qk_norm = true;
  m.attention_bias = false;
  m.tie_embeddings = false;
  m.num_experts = 128;
  m.moe_ffn_hidden_size = 768;
  m.moe_router_topk = 8;
  m.moe_shared_expert_ffn_hidden_size = 0;
  return m;
}

// mistralai/Mixtral-8x7B-v0.1 config.json.
inline muster::model_section mixtral_8x7b() {
  muster::model_section m;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 14336;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.head_dim = 0;  // 4096 / 32 = 128
  m.vocab_size = 32000;
  m.qk_norm = false;
  m.tie_embeddings = false;
  m.num_experts = 8;
  m.moe_ffn_hidden_size = 14336;
  m.moe_router_topk = 2;
  return m;
}

// deepseek-ai/DeepSeek-V2-Lite config.json (MLA without a query LoRA, 2 shared experts).
inline muster::model_section deepseek_v2_lite() {
  muster::model_section m;
  m.num_layers = 27;
  m.hidden_size = 2048;
  m.ffn_hidden_size = 10944;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.head_dim = 128;  // qk_nope_head_dim
  m.vocab_size = 102400;
  m.qk_norm = false;
  m.q_lora_rank = 0;
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  m.num_experts = 64;
  m.moe_ffn_hidden_size = 1408;
  m.moe_router_topk = 6;
  m.moe_shared_expert_ffn_hidden_size = 2 * 1408;  // n_shared_experts * moe_intermediate_size
  m.moe_first_dense_layers = 1;
  m.moe_layer_freq = 1;
  return m;
}

// Qwen/Qwen1.5-MoE-A2.7B config.json (Qwen2-MoE: q/k/v biases, a gated shared expert).
inline muster::model_section qwen15_moe_a27b() {
  muster::model_section m;
  m.num_layers = 24;
  m.hidden_size = 2048;
  m.ffn_hidden_size = 5632;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.vocab_size = 151936;
  m.qk_norm = false;
  m.attention_bias = true;
  m.num_experts = 60;
  m.moe_ffn_hidden_size = 1408;
  m.moe_router_topk = 4;
  m.moe_shared_expert_ffn_hidden_size = 5632;
  m.moe_shared_expert_gate = true;
  return m;
}

// Qwen/Qwen3-0.6B config.json: dense, tied embeddings.
inline muster::model_section qwen3_0_6b() {
  muster::model_section m;
  m.num_layers = 28;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 3072;
  m.num_attention_heads = 16;
  m.num_query_groups = 8;
  m.head_dim = 128;
  m.vocab_size = 151936;
  m.qk_norm = true;
  m.tie_embeddings = true;
  m.num_experts = 0;
  return m;
}

}  // namespace muster::test

// The engine's model config: see model_config.hpp.
#include "engine/model/model_config.hpp"

#include "common/error.hpp"
#include "launcher/plan/model_params.hpp"

namespace muster::engine::model {

model_config make_model_config(const model_section& m) {
  MUSTER_CHECK(m.kv_lora_rank == 0, errc::invalid_input,
               "model.kv_lora_rank = {}: the engine does not build multi-latent attention "
               "(DeepSeek-V2/V3) yet; plan such a model with `muster plan`, train it with "
               "kv_lora_rank = 0 (grouped-query attention)",
               m.kv_lora_rank);
  model_config c;
  c.num_layers = m.num_layers;
  c.hidden_size = m.hidden_size;
  c.ffn_hidden_size = m.ffn_hidden_size;
  c.num_heads = m.num_attention_heads;
  c.num_kv_heads = m.num_query_groups;
  c.head_dim = m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads;
  c.vocab_size = m.vocab_size;
  c.qk_norm = m.qk_norm;
  c.attention_bias = m.attention_bias;
  c.tie_embeddings = m.tie_embeddings;
  c.rope_theta = m.rope_theta;
  c.norm_eps = m.norm_eps;
  c.num_experts = m.num_experts;
  c.moe_ffn_hidden_size = m.moe_ffn_hidden_size;
  c.topk = m.moe_router_topk;
  c.topk_norm = m.moe_router_topk_norm;
  c.sigmoid_router = m.moe_router_score == "sigmoid";
  c.aux_loss_coeff = m.moe_aux_loss_coeff;
  c.z_loss_coeff = m.moe_z_loss_coeff;
  c.capacity_factor = m.moe_capacity_factor;
  c.shared_ffn_hidden_size = m.moe_shared_expert_ffn_hidden_size;
  c.shared_expert_gate = m.moe_shared_expert_gate;
  for (int layer = 0; layer < m.num_layers; ++layer)
    c.moe_layers.push_back(launcher::plan::is_moe_layer(m, layer));
  return c;
}

kernels::cuda::grouped_gemm_method expert_gemm_method(const std::string& value) {
  using method = kernels::cuda::grouped_gemm_method;
  if (value == "grouped") return method::grouped_batched;
  if (value == "per_expert") return method::per_group;
  if (value == "split") return method::split_batched;
  if (value == "sm90") return method::sm90;
  MUSTER_CHECK(value == "auto", errc::internal, "train.expert_gemm = {} passed validation", value);
  return method::automatic;
}

}  // namespace muster::engine::model

// Writing a model section as a Hugging Face config.json: see hf_config.hpp.
#include <nlohmann/json.hpp>

#include "common/hf_config.hpp"

namespace muster {

std::string hf_config_text(const model_section& m) {
  const bool qwen2 = m.attention_bias && !m.qk_norm;
  const bool moe = m.num_experts > 0;
  std::string type = qwen2 ? "qwen2" : "qwen3";
  if (moe) type += "_moe";
  const std::string arch = qwen2 ? (moe ? "Qwen2MoeForCausalLM" : "Qwen2ForCausalLM")
                                 : (moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM");
  nlohmann::json c = {
      {"architectures", {arch}},
      {"model_type", type},
      {"hidden_size", m.hidden_size},
      {"intermediate_size", m.ffn_hidden_size},
      {"num_hidden_layers", m.num_layers},
      {"num_attention_heads", m.num_attention_heads},
      {"num_key_value_heads", m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads},
      {"head_dim", m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads},
      {"vocab_size", m.vocab_size},
      {"tie_word_embeddings", m.tie_embeddings},
      {"rope_theta", m.rope_theta},
      {"rms_norm_eps", m.norm_eps},
      {"hidden_act", "silu"},
      {"attention_bias", m.attention_bias},
      {"torch_dtype", "float32"},
  };
  if (moe) {
    c["moe_intermediate_size"] = m.moe_ffn_hidden_size;
    c["num_experts"] = m.num_experts;
    c["num_experts_per_tok"] = m.moe_router_topk;
    c["norm_topk_prob"] = m.moe_router_topk_norm;
    c["router_aux_loss_coef"] = m.moe_aux_loss_coeff;
    c["decoder_sparse_step"] = m.moe_layer_freq;
    std::vector<int> dense;
    for (int i = 0; i < m.moe_first_dense_layers; ++i) dense.push_back(i);
    c["mlp_only_layers"] = dense;
    if (m.moe_shared_expert_ffn_hidden_size > 0)
      c["shared_expert_intermediate_size"] = m.moe_shared_expert_ffn_hidden_size;
  }
  return c.dump(2) + "\n";
}

}  // namespace muster

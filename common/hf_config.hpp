// Reading a Hugging Face `config.json` into the job file's model section, so a user plans or
// trains a published model by naming its config instead of copying its sizes.
//
// Field names by model_type:
//   mixtral              hidden_size, intermediate_size (per expert), num_local_experts,
//                        num_experts_per_tok; every layer is MoE
//   qwen2_moe, qwen3_moe intermediate_size (dense layers), moe_intermediate_size, num_experts,
//                        num_experts_per_tok, shared_expert_intermediate_size (Qwen2-MoE, with a
//                        shared-expert gate), decoder_sparse_step, mlp_only_layers (only a
//                        leading run of dense layers is representable), head_dim, attention
//                        bias (Qwen2) and q/k norms (Qwen3)
//   deepseek_v2, deepseek_v3  n_routed_experts, n_shared_experts * moe_intermediate_size,
//                        first_k_dense_replace, moe_layer_freq, q_lora_rank, kv_lora_rank,
//                        qk_nope_head_dim (-> head_dim), qk_rope_head_dim, v_head_dim,
//                        scoring_func
//   llama, mistral, qwen2, qwen3 (dense)  num_experts = 0
// Common: num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
// tie_word_embeddings, rope_theta, rms_norm_eps, router_aux_loss_coef (aux_loss_alpha for
// DeepSeek); norm_topk_prob where the model has it (absent: Hugging Face's default per type;
// Mixtral always normalises).
// Not here: the rest of the job file (job_config.hpp), checking the sizes (validate()).
#pragma once

#include <filesystem>
#include <string>

#include "common/config_schema.hpp"
#include "common/job_config.hpp"

namespace muster {

// Sets every model key the config.json gives, except keys already in `where` (set in the job
// file or on the command line: those win). Each key it sets is recorded in `where` as
// "<file>: <hf field>", so validation errors name the field of the config.json.
// Throws errc::config naming the file for an unreadable file, invalid JSON, an unknown
// model_type (listing the known ones), a missing required field, or a field of the wrong type.
void apply_hf_config(const std::filesystem::path& file, model_section& model,
                     config::sources& where);

// The config.json of `model` as Hugging Face's Qwen3-MoE (or Qwen2-MoE, when the model has
// attention biases and no q/k norms; Qwen3/Qwen2 for a dense model) names it, so a checkpoint
// the engine writes loads in transformers and apply_hf_config() reads back the same sizes.
// MLA (DeepSeek) models are not written (the engine does not train them).
std::string hf_config_text(const model_section& model);

}  // namespace muster

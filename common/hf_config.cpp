// Reading a Hugging Face config.json into the model section: see hf_config.hpp.
#include "common/hf_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "common/error.hpp"

namespace muster {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 9> kKnownTypes = {
    "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
    "llama",   "mistral",   "qwen2",     "qwen3"};

// Assigns the model keys from one config.json object, skipping keys the user set.
class hf_reader {
 public:
  // Keys already in `where` were set by the user; the reader never changes them.
  hf_reader(const json& cfg, std::string file, config::sources& where)
      : cfg_(cfg), file_(std::move(file)), where_(where), user_keys_(where) {}

  bool has(std::string_view field) const {
    auto it = cfg_.find(field);
    return it != cfg_.end() && !it->is_null();
  }

  // An integer field; null or absent leaves `value` as it is unless `required`.
  void set_int(int& value, std::string_view key, std::string_view field, bool required = false) {
    if (!has(field)) {
      MUSTER_CHECK(!required, errc::config,
                   "{}: {}: missing; a config.json for this model_type must give it (or set {} "
                   "in the job file)",
                   file_, field, key);
      return;
    }
    const int n = get_int(field, 0);
    assign(key, field, [&] { value = n; });
  }

  void set_bool(bool& value, std::string_view key, std::string_view field) {
    if (!has(field)) return;
    const json& v = cfg_.at(field);
    MUSTER_CHECK(v.is_boolean(), errc::config, "{}: {}: expected true or false, found {}", file_,
                 field, v.dump());
    assign(key, field, [&] { value = v.get<bool>(); });
  }

  // A number field (integer or not); null or absent leaves `value` as it is.
  void set_double(double& value, std::string_view key, std::string_view field) {
    if (!has(field)) return;
    const json& v = cfg_.at(field);
    MUSTER_CHECK(v.is_number(), errc::config, "{}: {}: expected a number, found {}", file_, field,
                 v.dump());
    assign(key, field, [&] { value = v.get<double>(); });
  }

  // A value derived by the reader (not one field): recorded as coming from `field`.
  template <class T>
  void set_value(T& value, std::string_view key, std::string_view field, T derived) {
    assign(key, field, [&] { value = std::move(derived); });
  }

  // An integer field in [0, INT_MAX], or `fallback` when it is null or absent.
  int get_int(std::string_view field, int fallback) const {
    if (!has(field)) return fallback;
    const json& v = cfg_.at(field);
    MUSTER_CHECK(v.is_number_integer(), errc::config, "{}: {}: expected an integer, found {}",
                 file_, field, v.dump());
    auto n = v.get<std::int64_t>();
    MUSTER_CHECK(n >= 0 && n <= std::numeric_limits<int>::max(), errc::config,
                 "{}: {}: {} is out of range", file_, field, n);
    return static_cast<int>(n);
  }

  const std::string& file() const { return file_; }

 private:
  template <class F>
  void assign(std::string_view key, std::string_view field, F&& apply) {
    if (user_keys_.count(key) != 0) return;  // set in the job file or on the command line
    apply();
    where_[std::string(key)] = fmt::format("{}: {}", file_, field);
  }

  const json& cfg_;
  std::string file_;
  config::sources& where_;
  const config::sources user_keys_;
};

json read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  MUSTER_CHECK(in.good(), errc::config,
               "{}: cannot read the Hugging Face config (model.config_json); give the path of a "
               "config.json",
               file.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    MUSTER_THROW(errc::config, "{}: not valid JSON at byte {}: {}", file.string(), e.byte,
                 e.what());
  }
}

// The common fields of every decoder.
void read_common(hf_reader& r, model_section& m) {
  r.set_int(m.num_layers, "model.num_layers", "num_hidden_layers", true);
  r.set_int(m.hidden_size, "model.hidden_size", "hidden_size", true);
  r.set_int(m.num_attention_heads, "model.num_attention_heads", "num_attention_heads", true);
  if (r.has("num_key_value_heads"))
    r.set_int(m.num_query_groups, "model.num_query_groups", "num_key_value_heads");
  else
    r.set_value(m.num_query_groups, "model.num_query_groups", "num_attention_heads",
                r.get_int("num_attention_heads", m.num_attention_heads));
  r.set_int(m.vocab_size, "model.vocab_size", "vocab_size", true);
  r.set_value(m.tie_embeddings, "model.tie_embeddings", "tie_word_embeddings", false);
  r.set_bool(m.tie_embeddings, "model.tie_embeddings", "tie_word_embeddings");
  r.set_value(m.head_dim, "model.head_dim", "head_dim", 0);
  r.set_int(m.head_dim, "model.head_dim", "head_dim");
  r.set_value(m.qk_norm, "model.qk_norm", "model_type", false);
  r.set_value(m.attention_bias, "model.attention_bias", "model_type", false);
  r.set_value(m.kv_lora_rank, "model.kv_lora_rank", "model_type", 0);
  r.set_value(m.q_lora_rank, "model.q_lora_rank", "model_type", 0);
  r.set_value(m.qk_rope_head_dim, "model.qk_rope_head_dim", "model_type", 0);
  r.set_value(m.v_head_dim, "model.v_head_dim", "model_type", 0);
  r.set_value(m.moe_shared_expert_ffn_hidden_size, "model.moe_shared_expert_ffn_hidden_size",
              "model_type", 0);
  r.set_value(m.moe_shared_expert_gate, "model.moe_shared_expert_gate", "model_type", false);
  r.set_value(m.moe_first_dense_layers, "model.moe_first_dense_layers", "model_type", 0);
  r.set_value(m.moe_layer_freq, "model.moe_layer_freq", "model_type", 1);
  r.set_value(m.moe_router_score, "model.moe_router_score", "model_type",
              std::string("softmax"));
  r.set_double(m.rope_theta, "model.rope_theta", "rope_theta");
  r.set_double(m.norm_eps, "model.norm_eps", "rms_norm_eps");
  r.set_double(m.moe_aux_loss_coeff, "model.moe_aux_loss_coeff", "router_aux_loss_coef");
  r.set_double(m.moe_aux_loss_coeff, "model.moe_aux_loss_coeff", "aux_loss_alpha");  // DeepSeek
}

void read_dense(hf_reader& r, model_section& m) {
  r.set_int(m.ffn_hidden_size, "model.ffn_hidden_size", "intermediate_size", true);
  r.set_value(m.num_experts, "model.num_experts", "model_type", 0);
}

// Mixtral's softmax over the top-k logits is a full softmax scaled to sum to 1 over the top k.
void read_mixtral(hf_reader& r, model_section& m) {
  r.set_value(m.moe_router_topk_norm, "model.moe_router_topk_norm", "model_type", true);
  r.set_int(m.moe_ffn_hidden_size, "model.moe_ffn_hidden_size", "intermediate_size", true);
  r.set_int(m.ffn_hidden_size, "model.ffn_hidden_size", "intermediate_size", true);
  r.set_int(m.num_experts, "model.num_experts", "num_local_experts", true);
  r.set_int(m.moe_router_topk, "model.moe_router_topk", "num_experts_per_tok", true);
}

// Qwen's decoder_sparse_step n makes layer i MoE when (i + 1) % n == 0, and mlp_only_layers
// makes listed layers dense: representable as a leading dense run plus a frequency.
void read_qwen_moe(hf_reader& r, const json& cfg, model_section& m) {
  r.set_int(m.ffn_hidden_size, "model.ffn_hidden_size", "intermediate_size", true);
  r.set_int(m.moe_ffn_hidden_size, "model.moe_ffn_hidden_size", "moe_intermediate_size", true);
  r.set_int(m.num_experts, "model.num_experts", "num_experts", true);
  r.set_int(m.moe_router_topk, "model.moe_router_topk", "num_experts_per_tok", true);
  r.set_value(m.moe_router_topk_norm, "model.moe_router_topk_norm", "norm_topk_prob", false);
  r.set_bool(m.moe_router_topk_norm, "model.moe_router_topk_norm", "norm_topk_prob");
  int step = std::max(1, r.get_int("decoder_sparse_step", 1));
  int leading_dense = step - 1;
  if (r.has("mlp_only_layers")) {
    const json& dense = cfg.at("mlp_only_layers");
    MUSTER_CHECK(dense.is_array(), errc::config, "{}: mlp_only_layers: expected a list, found {}",
                 r.file(), dense.dump());
    for (std::size_t i = 0; i < dense.size(); ++i)
      MUSTER_CHECK(dense[i].is_number_integer() && dense[i].get<int>() == static_cast<int>(i) &&
                       step == 1,
                   errc::config,
                   "{}: mlp_only_layers: {} with decoder_sparse_step {}: muster represents only a "
                   "leading run of dense layers (0, 1, ...); set model.moe_first_dense_layers "
                   "and model.moe_layer_freq in the job file instead",
                   r.file(), dense.dump(), step);
    if (!dense.empty()) leading_dense = static_cast<int>(dense.size());
  }
  r.set_value(m.moe_first_dense_layers, "model.moe_first_dense_layers", "decoder_sparse_step",
              leading_dense);
  r.set_value(m.moe_layer_freq, "model.moe_layer_freq", "decoder_sparse_step", step);
  if (r.has("shared_expert_intermediate_size")) {
    r.set_int(m.moe_shared_expert_ffn_hidden_size, "model.moe_shared_expert_ffn_hidden_size",
              "shared_expert_intermediate_size");
    r.set_value(m.moe_shared_expert_gate, "model.moe_shared_expert_gate",
                "shared_expert_intermediate_size",
                r.get_int("shared_expert_intermediate_size", 0) > 0);
  }
}

// DeepSeek-V2/V3: multi-latent attention, shared experts, leading dense layers.
void read_deepseek(hf_reader& r, std::string_view type, model_section& m) {
  r.set_int(m.ffn_hidden_size, "model.ffn_hidden_size", "intermediate_size", true);
  r.set_int(m.moe_ffn_hidden_size, "model.moe_ffn_hidden_size", "moe_intermediate_size", true);
  r.set_int(m.num_experts, "model.num_experts", "n_routed_experts", true);
  r.set_int(m.moe_router_topk, "model.moe_router_topk", "num_experts_per_tok", true);
  r.set_value(m.moe_router_topk_norm, "model.moe_router_topk_norm", "norm_topk_prob",
              type == "deepseek_v3");  // Hugging Face's defaults: V2 false, V3 true
  r.set_bool(m.moe_router_topk_norm, "model.moe_router_topk_norm", "norm_topk_prob");
  const std::int64_t shared = static_cast<std::int64_t>(r.get_int("n_shared_experts", 0)) *
                              r.get_int("moe_intermediate_size", 0);
  MUSTER_CHECK(shared <= std::numeric_limits<int>::max(), errc::config,
               "{}: n_shared_experts x moe_intermediate_size = {} is out of range", r.file(),
               shared);
  r.set_value(m.moe_shared_expert_ffn_hidden_size, "model.moe_shared_expert_ffn_hidden_size",
              "n_shared_experts", static_cast<int>(shared));
  int first = r.get_int("first_k_dense_replace", 0);
  int freq = std::max(1, r.get_int("moe_layer_freq", 1));
  // DeepSeek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0.
  MUSTER_CHECK(first % freq == 0, errc::config,
               "{}: first_k_dense_replace {} with moe_layer_freq {}: muster represents MoE layers "
               "as every n-th after the leading dense ones; set model.moe_first_dense_layers and "
               "model.moe_layer_freq in the job file instead",
               r.file(), first, freq);
  r.set_value(m.moe_first_dense_layers, "model.moe_first_dense_layers", "first_k_dense_replace",
              first);
  r.set_value(m.moe_layer_freq, "model.moe_layer_freq", "moe_layer_freq", freq);
  r.set_int(m.q_lora_rank, "model.q_lora_rank", "q_lora_rank");
  r.set_int(m.kv_lora_rank, "model.kv_lora_rank", "kv_lora_rank", true);
  r.set_int(m.head_dim, "model.head_dim", "qk_nope_head_dim", true);
  r.set_int(m.qk_rope_head_dim, "model.qk_rope_head_dim", "qk_rope_head_dim", true);
  r.set_int(m.v_head_dim, "model.v_head_dim", "v_head_dim", true);
  r.set_value(m.moe_router_score, "model.moe_router_score", "scoring_func",
              std::string(type == "deepseek_v3" ? "sigmoid" : "softmax"));
}

}  // namespace

void apply_hf_config(const std::filesystem::path& file, model_section& model,
                     config::sources& where) {
  json doc = read_json(file);
  MUSTER_CHECK(doc.is_object(), errc::config, "{}: expected a JSON object", file.string());
  // Multimodal configs (Qwen3-VL-MoE, ...) keep the language model in text_config.
  const json& cfg = (!doc.contains("model_type") && doc.contains("text_config"))
                        ? doc.at("text_config")
                        : doc;
  auto type_it = cfg.find("model_type");
  MUSTER_CHECK(type_it != cfg.end() && type_it->is_string(), errc::config,
               "{}: model_type: missing; muster reads the config.json of {}", file.string(),
               fmt::join(kKnownTypes, ", "));
  std::string type = type_it->get<std::string>();
  MUSTER_CHECK(std::find(kKnownTypes.begin(), kKnownTypes.end(), type) != kKnownTypes.end(),
               errc::config,
               "{}: model_type: \"{}\" is not one muster reads ({}); set the model.* sizes in the "
               "job file instead",
               file.string(), type, fmt::join(kKnownTypes, ", "));

  hf_reader r(cfg, file.string(), where);
  read_common(r, model);
  if (type == "mixtral") {
    read_mixtral(r, model);
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    read_qwen_moe(r, cfg, model);
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    read_deepseek(r, type, model);
  } else {
    read_dense(r, model);
  }
  if (type == "qwen3_moe" || type == "qwen3")  // Qwen3 normalises each head's query and key
    r.set_value(model.qk_norm, "model.qk_norm", "model_type", true);
  if (type == "qwen2_moe" || type == "qwen2")  // Qwen2 attention has q/k/v biases
    r.set_value(model.attention_bias, "model.attention_bias", "model_type", true);
  r.set_bool(model.attention_bias, "model.attention_bias", "attention_bias");
}

}  // namespace muster

// The parameter inventory and the per-stage slices: see model_params.hpp for the rules.
// The inventory is built block by block (embedding, each layer's attention and MLP, head) in
// the order Hugging Face's modules register their parameters.
#include "launcher/plan/model_params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string_view>
#include <utility>

namespace muster::launcher::plan {
namespace {

using shape_t = std::vector<std::int64_t>;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Where tensors are being added: their block, layer and name prefix ("model.layers.3.").
struct place {
  param_block block = param_block::layer;
  int layer = -1;
  std::string prefix;
};

void add(model_params& out, const place& at, std::string_view name, shape_t shape, tp_split split,
         bool matmul, int expert = -1) {
  param_tensor t;
  t.name = at.prefix + std::string(name);
  t.numel = 1;
  for (std::int64_t dim : shape) t.numel *= dim;
  t.shape = std::move(shape);
  t.split = split;
  t.expert = expert >= 0;
  t.expert_index = expert;
  t.block = at.block;
  t.layer = at.layer;
  t.matmul = matmul;
  out.tensors.push_back(std::move(t));
}

// `<name>.weight` of a linear layer: (out, in), a matmul weight.
void add_linear(model_params& out, const place& at, std::string_view name, std::int64_t out_dim,
                std::int64_t in_dim, tp_split split, int expert = -1) {
  add(out, at, fmt::format("{}.weight", name), {out_dim, in_dim}, split, true, expert);
}

// `<name>.weight` of an RMSNorm of `size` elements, replicated over TP.
void add_norm(model_params& out, const place& at, std::string_view name, std::int64_t size) {
  add(out, at, fmt::format("{}.weight", name), {size}, tp_split::replicated, false);
}

// `<name>.bias` of a column-parallel linear layer (split like its outputs).
void add_bias(model_params& out, const place& at, std::string_view name, std::int64_t size) {
  add(out, at, fmt::format("{}.bias", name), {size}, tp_split::column, false);
}

// Grouped-query attention: q/k/v/o, their biases (Qwen2) and q/k norms (Qwen3).
void add_gqa(model_params& out, const place& at, const model_section& m) {
  const std::int64_t hidden = m.hidden_size;
  const std::int64_t d = resolved_head_dim(m);
  const std::int64_t q = m.num_attention_heads * d;
  const std::int64_t kv = m.num_query_groups * d;
  const std::pair<std::string_view, std::int64_t> projections[] = {
      {"self_attn.q_proj", q}, {"self_attn.k_proj", kv}, {"self_attn.v_proj", kv}};
  for (const auto& [name, out_dim] : projections) {
    add_linear(out, at, name, out_dim, hidden, tp_split::column);
    if (m.attention_bias) add_bias(out, at, name, out_dim);
  }
  add_linear(out, at, "self_attn.o_proj", hidden, q, tp_split::row);
  if (m.qk_norm) {
    add_norm(out, at, "self_attn.q_norm", d);
    add_norm(out, at, "self_attn.k_norm", d);
  }
}

// Multi-head latent attention (DeepSeek-V2/V3). The down projections are replicated over TP
// (Megatron builds them "duplicated"); the up projections are column-parallel.
void add_mla(model_params& out, const place& at, const model_section& m) {
  const std::int64_t hidden = m.hidden_size;
  const std::int64_t heads = m.num_attention_heads;
  const std::int64_t nope = resolved_head_dim(m);
  const std::int64_t qk = nope + m.qk_rope_head_dim;
  if (m.q_lora_rank > 0) {
    add_linear(out, at, "self_attn.q_a_proj", m.q_lora_rank, hidden, tp_split::replicated);
    add_norm(out, at, "self_attn.q_a_layernorm", m.q_lora_rank);
    add_linear(out, at, "self_attn.q_b_proj", heads * qk, m.q_lora_rank, tp_split::column);
  } else {
    add_linear(out, at, "self_attn.q_proj", heads * qk, hidden, tp_split::column);
  }
  add_linear(out, at, "self_attn.kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, hidden,
             tp_split::replicated);
  add_norm(out, at, "self_attn.kv_a_layernorm", m.kv_lora_rank);
  add_linear(out, at, "self_attn.kv_b_proj", heads * (nope + m.v_head_dim), m.kv_lora_rank,
             tp_split::column);
  add_linear(out, at, "self_attn.o_proj", hidden, heads * m.v_head_dim, tp_split::row);
}

// A SwiGLU MLP of `ffn` intermediate size under `name` (gate/up column-, down row-parallel).
void add_swiglu(model_params& out, const place& at, std::string_view name, std::int64_t hidden,
                std::int64_t ffn, int expert = -1) {
  add_linear(out, at, fmt::format("{}.gate_proj", name), ffn, hidden, tp_split::column, expert);
  add_linear(out, at, fmt::format("{}.up_proj", name), ffn, hidden, tp_split::column, expert);
  add_linear(out, at, fmt::format("{}.down_proj", name), hidden, ffn, tp_split::row, expert);
}

// A MoE block: router, routed experts, and the shared expert with its gate when configured.
void add_moe(model_params& out, const place& at, const model_section& m) {
  const std::int64_t hidden = m.hidden_size;
  add_linear(out, at, "mlp.gate", m.num_experts, hidden, tp_split::replicated);
  for (int e = 0; e < m.num_experts; ++e) {
    add_swiglu(out, at, fmt::format("mlp.experts.{}", e), hidden, m.moe_ffn_hidden_size, e);
  }
  if (m.moe_shared_expert_ffn_hidden_size > 0) {
    add_swiglu(out, at, "mlp.shared_expert", hidden, m.moe_shared_expert_ffn_hidden_size);
    if (m.moe_shared_expert_gate) {
      add_linear(out, at, "mlp.shared_expert_gate", 1, hidden, tp_split::replicated);
    }
  }
}

void add_layer(model_params& out, const model_section& m, int layer) {
  const place at{param_block::layer, layer, fmt::format("model.layers.{}.", layer)};
  if (m.kv_lora_rank > 0) {
    add_mla(out, at, m);
  } else {
    add_gqa(out, at, m);
  }
  if (out.moe_layers[static_cast<std::size_t>(layer)]) {
    add_moe(out, at, m);
  } else {
    add_swiglu(out, at, "mlp", m.hidden_size, m.ffn_hidden_size);
  }
  add_norm(out, at, "input_layernorm", m.hidden_size);
  add_norm(out, at, "post_attention_layernorm", m.hidden_size);
}

// Fills total, active and active_matmul from the tensors (see model_params).
void count_totals(model_params& out, const model_section& m) {
  std::vector<std::int64_t> experts(out.moe_layers.size(), 0);
  std::vector<std::int64_t> expert_matmul(out.moe_layers.size(), 0);
  for (const param_tensor& t : out.tensors) {
    out.total += t.numel;
    if (t.expert) {
      experts[static_cast<std::size_t>(t.layer)] += t.numel;
      if (t.matmul) expert_matmul[static_cast<std::size_t>(t.layer)] += t.numel;
      continue;
    }
    out.active += t.numel;
    if (t.matmul) out.active_matmul += t.numel;
  }
  for (std::size_t i = 0; i < experts.size(); ++i) {
    if (!out.moe_layers[i]) continue;
    out.active += experts[i] * m.moe_router_topk / m.num_experts;
    out.active_matmul += expert_matmul[i] * m.moe_router_topk / m.num_experts;
  }
  if (m.tie_embeddings) {
    out.active_matmul += static_cast<std::int64_t>(m.vocab_size) * m.hidden_size;
  }
}

}  // namespace

std::int64_t param_tensor::rank_numel(int ways) const {
  switch (split) {
    case tp_split::replicated:
      return numel;
    case tp_split::column:
    case tp_split::vocab:
      return ceil_div(shape[0], ways) * (numel / shape[0]);
    case tp_split::row:
      return shape[0] * ceil_div(shape[1], ways);
  }
  return numel;
}

int resolved_head_dim(const model_section& model) {
  return model.head_dim > 0 ? model.head_dim : model.hidden_size / model.num_attention_heads;
}

bool is_moe_layer(const model_section& model, int layer) {
  const int freq = std::max(model.moe_layer_freq, 1);
  return model.num_experts > 0 && layer >= model.moe_first_dense_layers &&
         (layer - model.moe_first_dense_layers) % freq == 0;
}

model_params make_model_params(const model_section& model) {
  model_params out;
  out.num_experts = model.num_experts;
  out.tie_embeddings = model.tie_embeddings;
  for (int i = 0; i < model.num_layers; ++i) out.moe_layers.push_back(is_moe_layer(model, i));
  const std::int64_t vocab = model.vocab_size;
  const std::int64_t hidden = model.hidden_size;
  add(out, {param_block::embedding, -1, "model."}, "embed_tokens.weight", {vocab, hidden},
      tp_split::vocab, false);
  for (int i = 0; i < model.num_layers; ++i) add_layer(out, model, i);
  const place head{param_block::head, -1, ""};
  add_norm(out, head, "model.norm", hidden);
  if (!model.tie_embeddings) add_linear(out, head, "lm_head", vocab, hidden, tp_split::vocab);
  count_totals(out, model);
  return out;
}

std::int64_t train_flops_per_token(const model_params& params, const model_section& model,
                                   int seq_length) {
  const std::int64_t d = resolved_head_dim(model);
  const bool mla = model.kv_lora_rank > 0;
  const std::int64_t qk_dim = mla ? d + model.qk_rope_head_dim : d;
  const std::int64_t v_dim = mla ? model.v_head_dim : d;
  const std::int64_t attention =
      6LL * model.num_layers * seq_length * model.num_attention_heads * (qk_dim + v_dim);
  return 6 * params.active_matmul + attention;
}

std::int64_t stage_slice::numel() const {
  std::int64_t sum = 0;
  for (const shard_unit& u : units) sum += u.numel;
  return sum;
}

std::int64_t stage_slice::shard_numel() const {
  std::int64_t sum = 0;
  for (const shard_unit& u : units) sum += u.shard_numel();
  return sum;
}

std::vector<int> stage_layers(int num_layers, const layout& layout, int stage) {
  if (layout.first_stage_layers > 0 || layout.last_stage_layers > 0) {
    // Uneven (VPP = 1): the first and last stages as given, the rest split evenly.
    const int pp = layout.pp();
    const int first = layout.first_stage_layers;
    const int last = layout.last_stage_layers;
    const int middle_stages = pp - (first > 0) - (last > 0);
    const int per_middle = middle_stages > 0 ? (num_layers - first - last) / middle_stages : 0;
    auto count = [&](int s) {
      if (s == 0 && first > 0) return first;
      if (s == pp - 1 && last > 0) return last;
      return per_middle;
    };
    int begin = 0;
    for (int s = 0; s < stage; ++s) begin += count(s);
    std::vector<int> layers(static_cast<std::size_t>(count(stage)));
    std::iota(layers.begin(), layers.end(), begin);
    return layers;
  }
  const int chunks = std::max(layout.vpp, 1);
  const int per_chunk = num_layers / (layout.pp() * chunks);
  std::vector<int> layers;
  for (int c = 0; c < chunks; ++c) {
    const int first = (c * layout.pp() + stage) * per_chunk;
    for (int i = first; i < first + per_chunk; ++i) layers.push_back(i);
  }
  return layers;
}

stage_slice slice_stage(const model_params& params, const layout& layout, int stage) {
  const auto num_layers = static_cast<int>(params.moe_layers.size());
  const int owned_experts = params.num_experts / layout.ep();  // EP rank 0's: [0, owned)
  std::vector<std::int64_t> dense(params.moe_layers.size(), 0);
  std::vector<std::int64_t> expert(params.moe_layers.size(), 0);
  std::int64_t embedding = 0;
  std::int64_t head = 0;
  for (const param_tensor& t : params.tensors) {
    if (t.block == param_block::embedding) {
      embedding += t.rank_numel(layout.tp());
    } else if (t.block == param_block::head) {
      head += t.rank_numel(layout.tp());
    } else if (!t.expert) {
      dense[static_cast<std::size_t>(t.layer)] += t.rank_numel(layout.tp());
    } else if (t.expert_index < owned_experts) {
      expert[static_cast<std::size_t>(t.layer)] += t.rank_numel(layout.etp());
    }
  }
  if (params.tie_embeddings && layout.pp() > 1) head += embedding;  // the last stage's copy

  stage_slice s;
  s.stage = stage;
  s.layers = stage_layers(num_layers, layout, stage);
  const int dense_ranks = layout.dense_shard_ranks();
  if (stage == 0) s.units.push_back({unit_kind::embedding, -1, embedding, dense_ranks});
  for (int layer : s.layers) {
    const auto i = static_cast<std::size_t>(layer);
    s.units.push_back({unit_kind::dense, layer, dense[i], dense_ranks});
    if (params.moe_layers[i]) {
      s.units.push_back({unit_kind::expert, layer, expert[i], layout.expert_shard_ranks()});
    }
  }
  if (stage == layout.pp() - 1) s.units.push_back({unit_kind::head, -1, head, dense_ranks});
  return s;
}

}  // namespace muster::launcher::plan

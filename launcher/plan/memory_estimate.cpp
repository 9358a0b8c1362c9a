// The memory estimate: see memory_estimate.hpp for every formula. This file turns the job's
// strings into byte sizes once, lists a layer's activation terms, and sums the categories of
// each pipeline stage over its sharding units (model_params.hpp).
#include "launcher/plan/memory_estimate.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "launcher/plan/sharding.hpp"

namespace muster::launcher::plan {
namespace {

enum class recompute { none, selective, full };

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

recompute parse_recompute(const std::string& value) {
  if (value == "none") return recompute::none;
  if (value == "selective") return recompute::selective;
  if (value == "full") return recompute::full;
  MUSTER_THROW(errc::config, "train.recompute: invalid value: {}; use none, selective or full",
               value);
}

// Bytes of one element of a "bf16"/"fp32" setting named `key`.
std::int64_t dtype_bytes(const std::string& value, const char* key) {
  if (value == "bf16") return 2;
  if (value == "fp32") return 4;
  MUSTER_THROW(errc::config, "{}: invalid value: {}; use bf16 or fp32", key, value);
}

// The sizes every activation formula uses (the header's notation).
struct dims {
  std::int64_t t = 0;     // tokens a rank holds per micro-batch
  std::int64_t t_sp = 0;  // t, or ceil(t/TP) with sequence parallelism
  std::int64_t a = 2;     // bytes of an activation element
  std::int64_t h = 0;
  std::int64_t tp = 1;
  std::int64_t etp = 1;
  std::int64_t routed_rows = 0;  // R: rows a rank's experts process
};

dims make_dims(const job_config& config, const layout& layout, const batch_plan& batch) {
  const model_section& m = config.model;
  dims d;
  d.t = static_cast<std::int64_t>(batch.micro_batch_size) * batch.row_tokens / layout.cp();
  d.tp = layout.tp();
  d.etp = layout.etp();
  d.t_sp = layout.sequence_parallel ? ceil_div(d.t, d.tp) : d.t;
  d.a = dtype_bytes(config.train.precision, "train.precision");
  d.h = m.hidden_size;
  const double capacity = m.moe_capacity_factor > 0 ? m.moe_capacity_factor : 1.0;
  const double rows = static_cast<double>(d.t) * m.moe_router_topk * static_cast<double>(d.etp) /
                      static_cast<double>(d.tp) * capacity;
  d.routed_rows = static_cast<std::int64_t>(std::ceil(rows));
  return d;
}

void add_gqa_terms(std::vector<activation_term>& out, const model_section& m, const dims& x) {
  const std::int64_t d = resolved_head_dim(m);
  const std::int64_t n = m.num_attention_heads / x.tp;
  const std::int64_t g = ceil_div(m.num_query_groups, x.tp);
  out.push_back({"input_layernorm input", x.t_sp * x.h * x.a, false});
  out.push_back({"q/k/v projection input", x.t_sp * x.h * x.a, false});
  if (m.qk_norm) out.push_back({"q_norm/k_norm inputs", x.t * (n + g) * d * x.a, false});
  out.push_back({"attention core inputs (Q, K, V)", x.t * (n + 2 * g) * d * x.a, false});
  out.push_back({"attention core output", x.t * n * d * x.a, true});
  out.push_back({"attention core logsumexp", x.t * n * 4, true});
}

void add_mla_terms(std::vector<activation_term>& out, const model_section& m, const dims& x) {
  const std::int64_t qk = resolved_head_dim(m) + m.qk_rope_head_dim;
  const std::int64_t v = m.v_head_dim;
  const std::int64_t n = m.num_attention_heads / x.tp;
  out.push_back({"input_layernorm input", x.t_sp * x.h * x.a, false});
  out.push_back({"q/kv_a projection input", x.t_sp * x.h * x.a, false});
  if (m.q_lora_rank > 0) {
    out.push_back({"q_a_layernorm and q_b_proj inputs", 2 * x.t_sp * m.q_lora_rank * x.a, false});
  }
  out.push_back({"kv_a_layernorm and kv_b_proj inputs", 2 * x.t_sp * m.kv_lora_rank * x.a, false});
  out.push_back({"attention core inputs (Q, K, V)", x.t * n * (2 * qk + v) * x.a, false});
  out.push_back({"attention core output", x.t * n * v * x.a, true});
  out.push_back({"attention core logsumexp", x.t * n * 4, true});
}

// A SwiGLU MLP of `ffn` (already split) intermediate size over `rows` rows.
void add_swiglu_terms(std::vector<activation_term>& out, const std::string& what, std::int64_t rows,
                      std::int64_t ffn, const dims& x) {
  out.push_back({what + " gate and up outputs", 2 * rows * ffn * x.a, false});
  out.push_back({what + " down_proj input", rows * ffn * x.a, false});
}

void add_mlp_terms(std::vector<activation_term>& out, const model_section& m, bool moe,
                   const dims& x) {
  out.push_back({"post_attention_layernorm input", x.t_sp * x.h * x.a, false});
  out.push_back({moe ? "router and dispatch input" : "mlp input", x.t_sp * x.h * x.a, false});
  if (!moe) {
    add_swiglu_terms(out, "mlp", x.t, ceil_div(m.ffn_hidden_size, x.tp), x);
    return;
  }
  const std::int64_t rows = x.routed_rows;
  out.push_back({"router logits and probabilities (fp32)", 2 * x.t_sp * m.num_experts * 4, false});
  out.push_back({"expert inputs", rows * x.h * x.a, false});
  add_swiglu_terms(out, "expert", rows, ceil_div(m.moe_ffn_hidden_size, x.etp), x);
  out.push_back({"expert outputs", rows * x.h * x.a, false});
  if (m.moe_shared_expert_ffn_hidden_size > 0) {
    add_swiglu_terms(out, "shared expert", x.t, ceil_div(m.moe_shared_expert_ffn_hidden_size, x.tp),
                     x);
  }
}

std::vector<activation_term> terms_of(const model_section& m, bool moe, const dims& x) {
  std::vector<activation_term> terms;
  if (m.kv_lora_rank > 0) {
    add_mla_terms(terms, m, x);
  } else {
    add_gqa_terms(terms, m, x);
  }
  add_mlp_terms(terms, m, moe, x);
  return terms;
}

std::int64_t sum_bytes(const std::vector<activation_term>& terms) {
  std::int64_t sum = 0;
  for (const activation_term& term : terms) sum += term.bytes;
  return sum;
}

// Bytes of `terms` stored under `mode` (full: the layer input only).
std::int64_t stored_bytes(const std::vector<activation_term>& terms, recompute mode,
                          const dims& x) {
  if (mode == recompute::full) return x.t_sp * x.h * x.a;
  if (mode == recompute::none) return sum_bytes(terms);
  std::int64_t sum = 0;
  for (const activation_term& term : terms) {
    if (!term.attention_core) sum += term.bytes;
  }
  return sum;
}

// Everything estimate_memory resolves once for all stages.
struct job_sizes {
  sharding shard = sharding::no_shard;
  recompute mode = recompute::none;
  std::int64_t pb = 2;   // param bytes
  std::int64_t gb = 4;   // grad bytes
  std::int64_t ob = 12;  // optimizer bytes
  std::int64_t rb = 4;   // bytes of the gradients as reduced (grad_reduce_dtype)
  dims x;
  std::vector<activation_term> dense_terms;  // a dense layer's
  std::vector<activation_term> moe_terms;    // a MoE layer's
};

void add_persistent(stage_memory& out, const stage_slice& slice, const job_sizes& s) {
  const bool optim = s.shard != sharding::no_shard;
  const bool grads = s.shard == sharding::optim_grads || s.shard == sharding::optim_grads_params;
  const bool params = s.shard == sharding::optim_grads_params;
  for (const shard_unit& u : slice.units) {
    const std::int64_t shard = u.shard_numel();
    // Whole: a sharded strategy's buffers are padded to S shards; no_shard's are not.
    const std::int64_t whole = optim ? u.padded_numel() : u.numel;
    out.params_bytes += (params ? shard : whole) * s.pb;
    out.grads_bytes += (grads ? shard : whole) * s.gb;
    out.optimizer_bytes += (optim ? shard : whole) * s.ob;
  }
}

// The largest gather group of the stage: a layer's units together, the embedding, the head.
std::int64_t largest_gather_group(const stage_slice& slice) {
  std::int64_t largest = 0;
  std::size_t i = 0;
  while (i < slice.units.size()) {
    std::int64_t group = slice.units[i].padded_numel();
    const int layer = slice.units[i].layer;
    for (++i; layer >= 0 && i < slice.units.size() && slice.units[i].layer == layer; ++i) {
      group += slice.units[i].padded_numel();
    }
    largest = std::max(largest, group);
  }
  return largest;
}

void add_activations(stage_memory& out, const stage_slice& slice, const model_params& params,
                     const job_sizes& s, bool last) {
  std::int64_t stored = 0;
  std::int64_t largest_layer = 0;
  for (int layer : slice.layers) {
    const bool moe = params.moe_layers[static_cast<std::size_t>(layer)];
    const auto& terms = moe ? s.moe_terms : s.dense_terms;
    stored += stored_bytes(terms, s.mode, s.x);
    largest_layer = std::max(largest_layer, sum_bytes(terms));
  }
  if (last) stored += 2 * s.x.t_sp * s.x.h * s.x.a;  // model.norm and lm_head inputs
  out.activations_bytes = std::llround(out.microbatches_in_flight * static_cast<double>(stored));
  if (s.mode == recompute::full) out.activations_bytes += largest_layer;
}

void add_temporaries(stage_memory& out, const stage_slice& slice, const model_params& params,
                     const job_config& config, const job_sizes& s, bool last) {
  const std::int64_t unit = largest_gather_group(slice);
  // Whole gradients, fp32 as muster-train sums them: the group computing and, under
  // overlap_grad_reduce, the one before it reducing; plus the copy one reduces in
  // grad_reduce_dtype when that is not fp32.
  const std::int64_t whole_grads =
      (config.parallel.overlap_grad_reduce ? 2 : 1) * 4 + (s.rb != 4 ? s.rb : 0);
  if (s.shard == sharding::optim_grads_params)
    out.fsdp_buffers_bytes = unit * (2 * s.pb + whole_grads);
  if (s.shard == sharding::optim_grads) out.fsdp_buffers_bytes = unit * whole_grads;
  // A tied embedding on a stage that also has the head stays whole from forward to the end of
  // backward, beside the group being computed.
  for (const shard_unit& u : slice.units) {
    if (u.kind != unit_kind::embedding || !last || !config.model.tie_embeddings) continue;
    if (s.shard == sharding::optim_grads_params)
      out.fsdp_buffers_bytes += u.padded_numel() * (s.pb + s.gb);
    if (s.shard == sharding::optim_grads) out.fsdp_buffers_bytes += u.padded_numel() * s.gb;
  }
  const bool has_moe = std::any_of(slice.layers.begin(), slice.layers.end(), [&](int layer) {
    return params.moe_layers[static_cast<std::size_t>(layer)];
  });
  if (has_moe) out.moe_dispatch_bytes = 2 * s.x.routed_rows * s.x.h * s.x.a;
  if (last) {
    out.logits_bytes = s.x.t * ceil_div(config.model.vocab_size, s.x.tp) * (s.x.a + 4);
  }
}

}  // namespace

weight_layout parse_weight_layout(const std::string& value, const std::string& source) {
  if (value == "megatron") return weight_layout::megatron;
  if (value == "muster-train") return weight_layout::muster_train;
  MUSTER_THROW(errc::invalid_input,
               "{}: '{}' is not an engine whose memory the plan knows; use megatron (bf16 "
               "weights and an fp32 copy) or muster-train (fp32 weights under autocast)",
               source, value);
}

std::int64_t stage_memory::total_bytes() const {
  return params_bytes + grads_bytes + optimizer_bytes + activations_bytes + fsdp_buffers_bytes +
         moe_dispatch_bytes + logits_bytes + reserved_bytes;
}

std::vector<activation_term> layer_activation_terms(const job_config& config, const layout& layout,
                                                    const batch_plan& batch, int layer) {
  return terms_of(config.model, is_moe_layer(config.model, layer),
                  make_dims(config, layout, batch));
}

double microbatches_in_flight(const layout& layout, int grad_accum_steps, int stage) {
  const int pp = layout.pp();
  const int vpp = layout.vpp;
  if (vpp == 1) return std::min(pp - stage, grad_accum_steps);
  // Interleaved 1F1B: rank r warms up with 2(p - r - 1) + (v - 1)p model-chunk micro-batches
  // and holds one more at its peak, each chunk 1/v of its layers.
  const std::int64_t chunks =
      std::min<std::int64_t>(static_cast<std::int64_t>(grad_accum_steps) * vpp,
                             2LL * (pp - stage - 1) + (vpp - 1) * pp + 1);
  return static_cast<double>(chunks) / vpp;
}

memory_estimate estimate_memory(const job_config& config, const layout& layout,
                                const batch_plan& batch, const memory_options& options) {
  return estimate_memory(config, make_model_params(config.model), layout, batch, options);
}

memory_estimate estimate_memory(const job_config& config, const model_params& params,
                                const layout& layout, const batch_plan& batch,
                                const memory_options& options) {
  job_sizes s;
  s.shard = parse_sharding(config.parallel.sharding);
  s.mode = parse_recompute(config.train.recompute);
  s.pb = dtype_bytes(config.train.precision, "train.precision");
  s.rb = dtype_bytes(config.train.grad_reduce_dtype, "train.grad_reduce_dtype");
  s.gb = s.rb;
  s.ob = s.pb == 2 ? 12 : 8;
  if (options.weights == weight_layout::muster_train) {
    s.pb = 4;
    s.gb = 4;
    s.ob = 8;
  }
  s.x = make_dims(config, layout, batch);
  s.dense_terms = terms_of(config.model, false, s.x);
  s.moe_terms = terms_of(config.model, true, s.x);

  memory_estimate estimate;
  estimate.gpu_memory_bytes = options.gpu_memory_bytes;
  for (int stage = 0; stage < layout.pp(); ++stage) {
    const stage_slice slice = slice_stage(params, layout, stage);
    const bool last = stage == layout.pp() - 1;
    stage_memory m;
    m.stage = stage;
    m.reserved_bytes = options.reserved_bytes;
    m.microbatches_in_flight = microbatches_in_flight(layout, batch.grad_accum_steps, stage);
    add_persistent(m, slice, s);
    add_activations(m, slice, params, s, last);
    add_temporaries(m, slice, params, config, s, last);
    if (estimate.stages.empty() || m.total_bytes() > estimate.worst.total_bytes()) {
      estimate.worst = m;
    }
    estimate.stages.push_back(m);
  }
  return estimate;
}

std::vector<std::pair<std::string, std::int64_t>> memory_rows(const stage_memory& stage) {
  return {{"params", stage.params_bytes},
          {"grads", stage.grads_bytes},
          {"optimizer", stage.optimizer_bytes},
          {"activations", stage.activations_bytes},
          {"fsdp_buffers", stage.fsdp_buffers_bytes},
          {"moe_dispatch", stage.moe_dispatch_bytes},
          {"logits", stage.logits_bytes},
          {"reserved", stage.reserved_bytes},
          {"total", stage.total_bytes()}};
}

std::vector<std::pair<std::string, std::int64_t>> memory_rows(const memory_estimate& estimate) {
  auto rows = memory_rows(estimate.worst);
  rows.emplace_back("gpu_memory", estimate.gpu_memory_bytes);
  rows.emplace_back("margin", estimate.margin_bytes());
  return rows;
}

}  // namespace muster::launcher::plan

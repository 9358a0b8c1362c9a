// The parameter inventory of the decoder a model_section describes (Qwen3-MoE, Qwen2-MoE,
// Mixtral, DeepSeek-V2/V3 and their dense relatives): every tensor with its Hugging Face name and
// shape, how tensor and expert parallelism split it, the model's total and active parameter
// counts, its training FLOPs per token, and what one rank of a pipeline stage holds, grouped
// into the sharding units the engine's FSDP shards.
// Not here: bytes (memory_estimate.hpp), checking the sizes (validate(), which has run: every
// count here divides as the layout needs), reading checkpoints.
//
// Names follow Qwen3-MoE / DeepSeek (`model.layers.N.mlp.experts.E.gate_proj.weight`). Other
// families map one to one: Mixtral's `block_sparse_moe.{gate, experts.E.w1, w3, w2}` are
// `mlp.{gate, experts.E.gate_proj, up_proj, down_proj}`; DeepSeek's `mlp.shared_experts.*` is
// `mlp.shared_expert.*`. Shapes are HF's: a linear weight is (out, in).
//
// Which layers are MoE (every n-th after the leading dense ones):
//   layer i is MoE  iff  num_experts > 0 && i >= moe_first_dense_layers &&
//                        (i - moe_first_dense_layers) % moe_layer_freq == 0
// This covers Qwen2-MoE's `(i + 1) % decoder_sparse_step == 0` (first = step - 1, freq = step)
// and DeepSeek's `i >= first_k_dense_replace && i % moe_layer_freq == 0` whenever
// first_k_dense_replace is a multiple of the frequency (common/hf_config.cpp checks it).
//
// Sharding units, the FSDP unit (the engine shards exactly like this):
//   - the embedding (model.embed_tokens.weight), on pipeline stage 0;
//   - per decoder layer, its non-expert tensors (attention, norms, dense MLP or router and shared
//     expert) as one unit, and, for a MoE layer, its routed-expert tensors as a second unit;
//   - the head: model.norm.weight + lm_head.weight on the last stage. With tie_embeddings the
//     head holds no lm_head; when PP > 1 it holds a copy of the embedding instead (as Megatron
//     does: the last stage keeps its own copy and the two are all-reduced).
// A unit's numel is what one rank holds after tensor parallelism (non-expert tensors split over
// TP, expert tensors over ETP) and expert parallelism (EP rank r owns experts
// [r*E/EP, (r+1)*E/EP)). Non-expert units (embedding, layer, head) are sharded over
// layout.dense_shard_ranks() = DP*CP ranks, expert units over layout.expert_shard_ranks() = EDP.
// Each unit is one flat buffer padded to a multiple of S shard ranks: a rank holds ceil(n / S).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job_config.hpp"
#include "launcher/plan/layout.hpp"

namespace muster::launcher::plan {

// How tensor parallelism (TP, or ETP for expert tensors) splits a tensor, as Megatron's parallel
// linear layers do.
enum class tp_split {
  replicated,  // whole on every rank: norms, router, shared-expert gate, MLA down projections
  column,      // dim 0 (outputs) split: q/k/v, gate/up, MLA up projections, q/k/v biases
  row,         // dim 1 (inputs) split: o_proj, down_proj
  vocab,       // dim 0 (vocab rows) split, ceil(vocab / TP) rows a rank: embedding, lm_head
};

// Where a tensor sits in the model.
enum class param_block {
  embedding,  // model.embed_tokens
  layer,      // model.layers.N
  head,       // model.norm and lm_head
};

// One tensor of the model's state dict.
struct param_tensor {
  std::string name;                 // "model.layers.3.self_attn.q_proj.weight"
  std::vector<std::int64_t> shape;  // HF's shape; (out, in) for a linear weight
  std::int64_t numel = 0;           // product of shape
  tp_split split = tp_split::replicated;
  bool expert = false;    // a routed expert's tensor: split over ETP, owned by one EP rank
  int expert_index = -1;  // which routed expert, or -1
  param_block block = param_block::layer;
  int layer = -1;       // decoder layer for block == layer, else -1
  bool matmul = false;  // a weight multiplied with activations (counted in FLOPs)

  // Elements one rank of a group of `ways` tensor-parallel ranks holds (ceil on the split dim).
  std::int64_t rank_numel(int ways) const;
};

// The whole inventory and its totals.
struct model_params {
  std::vector<param_tensor> tensors;  // embedding, then layer by layer, then head (HF's order)
  std::vector<bool> moe_layers;       // moe_layers[i]: layer i is a MoE layer
  int num_experts = 0;                // routed experts of each MoE layer
  bool tie_embeddings = false;        // lm_head is the embedding (no lm_head tensor)
  std::int64_t total = 0;             // every parameter once (a tied embedding once)
  // Parameters one token uses: every non-expert tensor (embedding and lm_head included, as the
  // published "active" figures count them) + moe_router_topk of the routed experts of each MoE
  // layer (topk / num_experts of that layer's expert parameters).
  std::int64_t active = 0;
  // The matmul weights one token uses: `active` less the embedding lookup, norms and biases;
  // the output projection counts vocab * hidden even when tied to the embedding.
  std::int64_t active_matmul = 0;
};

// head_dim, or hidden_size / num_attention_heads when it is 0. Under MLA it is the "nope" part
// of a query/key head (DeepSeek's qk_nope_head_dim).
int resolved_head_dim(const model_section& model);

// Whether layer `layer` is a MoE layer (the rule in the file comment).
bool is_moe_layer(const model_section& model, int layer);

// The inventory of `model`. Attention is GQA (q/k/v/o, q_norm/k_norm of head_dim each when
// qk_norm, q/k/v biases when attention_bias), or MLA when kv_lora_rank > 0 (q_proj, or
// q_a_proj + q_a_layernorm + q_b_proj when q_lora_rank > 0; kv_a_proj_with_mqa, kv_a_layernorm,
// kv_b_proj, o_proj; no qk_norm, no biases). A MoE layer has mlp.gate (num_experts x hidden),
// the routed experts, and when moe_shared_expert_ffn_hidden_size > 0 a shared expert, gated by
// mlp.shared_expert_gate (1 x hidden) when moe_shared_expert_gate. A dense layer has a SwiGLU
// MLP of ffn_hidden_size.
model_params make_model_params(const model_section& model);

// Training FLOPs of one token (forward + backward, no recompute), for MFU:
//   6 * active_matmul                                          (2 forward + 4 backward per MAC)
//   + 6 * num_layers * seq_length * heads * (qk_head_dim + v_head_dim)   (scores and values)
// qk_head_dim = v_head_dim = head_dim for GQA; under MLA qk_head_dim = head_dim +
// qk_rope_head_dim and v_head_dim = v_head_dim. For GQA the second term is PaLM's
// 12 * layers * seq * heads * head_dim. Attention is counted over the whole row (no causal
// halving, as PaLM and Megatron count it); packed rows of short documents do less.
std::int64_t train_flops_per_token(const model_params& params, const model_section& model,
                                   int seq_length);

// What kind of sharding unit.
enum class unit_kind {
  embedding,  // model.embed_tokens (stage 0)
  dense,      // a layer's non-expert tensors
  expert,     // a MoE layer's routed-expert tensors
  head,       // model.norm + lm_head (or the tied embedding's copy), last stage
};

// One sharding unit as one rank sees it.
struct shard_unit {
  unit_kind kind = unit_kind::dense;
  int layer = -1;          // the decoder layer of a dense or expert unit, else -1
  std::int64_t numel = 0;  // elements one rank holds after TP/ETP/EP splitting, before FSDP
  int shard_ranks = 1;     // S: dense_shard_ranks() (embedding, dense, head) or EDP (expert)

  // Elements of this unit one rank holds when sharded: ceil(numel / S).
  std::int64_t shard_numel() const { return (numel + shard_ranks - 1) / shard_ranks; }
  // The unit's flat buffer whole, padded to S shards: S * ceil(numel / S).
  std::int64_t padded_numel() const { return shard_numel() * shard_ranks; }
};

// What one rank of pipeline stage `stage` holds.
struct stage_slice {
  int stage = 0;
  std::vector<int> layers;        // its decoder layers, model chunk by model chunk
  std::vector<shard_unit> units;  // embedding (stage 0), per layer dense [+ expert], head (last)

  // Sum of the units' numel (unsharded).
  std::int64_t numel() const;
  // Sum of the units' shard_numel() (every unit sharded, padding included).
  std::int64_t shard_numel() const;
};

// The decoder layers of pipeline stage `stage`. With layout.first_stage_layers or
// last_stage_layers set (VPP = 1 only), those stages hold that many and the other stages split
// the rest evenly (Megatron's --decoder-first/last-pipeline-num-layers). Otherwise layers split
// evenly: with VPP = 1, stage s holds
// num_layers/PP consecutive layers starting at s*num_layers/PP; with VPP > 1 (Megatron's
// interleaving) it holds VPP model chunks of n = num_layers/(PP*VPP) layers, chunk c being
// layers [(c*PP + s)*n, (c*PP + s + 1)*n). Precondition: PP*VPP divides num_layers.
std::vector<int> stage_layers(int num_layers, const layout& layout, int stage);

// What one rank of `stage` holds under `layout` (see "Sharding units" above).
stage_slice slice_stage(const model_params& params, const layout& layout, int stage);

}  // namespace muster::launcher::plan

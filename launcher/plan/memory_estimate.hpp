// Per-GPU memory of a training job before it runs: the persistent state (parameters, gradients,
// optimizer), the activations saved for backward, and the temporaries, for every pipeline
// stage, and whether the worst stage fits the GPU. `muster plan` prints it; the engine's
// measured peak is compared with it.
// Not here: the parameter inventory and sharding units (model_params.hpp), checking the layout
// (every value taken here is already validated), measuring anything.
//
// Notation. b = micro_batch_size, r = row_tokens, t = b*r/CP tokens a rank holds per
// micro-batch, t_sp = ceil(t/TP) with sequence_parallel and t without; h = hidden, n = heads,
// g = query groups, d = head_dim (resolved), F = ffn_hidden_size, E = num_experts,
// k = moe_router_topk, f = moe_ffn_hidden_size, Sh = moe_shared_expert_ffn_hidden_size,
// V = vocab; a = 2 bytes (train.precision bf16) or 4 (fp32) per activation element.
//
// Persistent, summed over the stage's sharding units (model_params.hpp); a category that the
// strategy shards takes a unit's padded shard ceil(n/S), the others its whole numel n (padded to
// S*ceil(n/S) under a sharding strategy, whose flat buffers are; what the engine holds, exactly):
//   params     n * pb       pb = 2 (bf16) or 4 (fp32)        sharded by optim_grads_params
//   grads      n * gb       gb = 4 (grad_reduce_dtype fp32) or 2 (bf16)   by optim_grads and up
//   optimizer  n * ob       ob = 12 (bf16: fp32 main params 4 + Adam moments 4 + 4) or 8 (fp32)
//                                                              sharded by optim and up
//   (memory_options.weights = muster_train: pb = 4, gb = 4, ob = 8 under bf16 as well)
// parallel.sharding: no_shard (nothing), optim (ZeRO-1), optim_grads (ZeRO-2),
// optim_grads_params (ZeRO-3), as Megatron-FSDP names them. With bf16, fp32 grads and optim
// this is Megatron's distributed optimizer: 6 + 12/DP bytes a parameter.
//
// Activations saved for backward by one layer for one micro-batch (layer_activation_terms):
//   attention (GQA)  input_layernorm input t_sp*h*a; q/k/v input (the norm output) t_sp*h*a;
//                    q_norm/k_norm inputs t*(n+g)*d/TP*a (when qk_norm); attention core inputs
//                    Q, K, V t*(n+2g)*d/TP*a; core output (also o_proj's input) t*n*d/TP*a;
//                    core logsumexp t*n/TP*4. The core is flash-style: no seq^2 matrix.
//   attention (MLA)  input_layernorm input and the projections' input, t_sp*h*a each;
//                    q_a_layernorm and q_b_proj inputs 2*t_sp*q_lora_rank*a (when > 0);
//                    kv_a_layernorm and kv_b_proj inputs 2*t_sp*kv_lora_rank*a; core inputs
//                    t*n*(2*(d+qk_rope_head_dim) + v_head_dim)/TP*a; core output
//                    t*n*v_head_dim/TP*a; logsumexp t*n/TP*4.
//   dense MLP        post_attention_layernorm input t_sp*h*a; gate/up input t_sp*h*a; gate and up
//                    outputs 2*t*F/TP*a; down_proj input t*F/TP*a.
//   MoE              post_attention_layernorm input t_sp*h*a; router/dispatch input t_sp*h*a;
//                    router logits and probabilities in fp32 2*t_sp*E*4; with
//                    R = ceil(t*k*ETP/TP * c) routed rows a rank's experts process (c = the
//                    capacity factor when > 0, else 1; the TP ranks' tokens spread over the
//                    ETP x EP x EDP expert mesh): expert inputs R*h*a, gate and up outputs
//                    2*R*f/ETP*a, down_proj inputs R*f/ETP*a, expert outputs (weighed by the
//                    probabilities when un-permuted) R*h*a; shared expert gate and up outputs
//                    2*t*Sh/TP*a and down_proj input t*Sh/TP*a.
//   head (last stage, counted with the layers) model.norm input and lm_head input, t_sp*h*a each.
// Per layer stored, by train.recompute:
//   none       every term
//   selective  every term but the attention core's output and logsumexp (the engine recomputes
//              the core together with o_proj, which consumes its output)
//   full       t_sp*h*a, the layer's input; plus, once per stage, the largest of its layers'
//              "none" sums (the layer being recomputed)
// Stage s of PP holds f_s = min(PP - s, grad_accum_steps) micro-batches in flight (1F1B). With
// VPP = v > 1 (interleaved 1F1B) rank s warms up with 2(PP - s - 1) + (v - 1)PP model-chunk
// micro-batches and holds one more at its peak, each chunk 1/v of its layers:
//   f_s = min(grad_accum_steps * v, 2(PP - s - 1) + (v - 1)PP + 1) / v
// which for stage 0 is Megatron's interleaving penalty PP * (1 + (PP-1)/(PP*v))
// (megatron/training/theoretical_memory_usage.py) and grows with v on every stage.
// Activations of stage s:
//   round(f_s * (sum over its layers of stored + head terms on the last stage)) + full's layer
//
// Temporaries of stage s:
//   fsdp_buffers  U = the largest gather group on the stage, in per-rank numel before sharding
//                 (one layer's dense + expert units; the embedding; the head):
//                 optim_grads_params U*(2*pb + G) (current and prefetched params; unsharded
//                 grads, fp32 as muster-train sums them, of 2 units under
//                 parallel.overlap_grad_reduce (the one computing, the one reducing), else 1,
//                 plus the reducing one's copy in grad_reduce_dtype when that is bf16:
//                 G = 8 or 4, + 2); optim_grads U*G; else 0; units padded to S shards. With
//                 tie_embeddings, on the stage that holds both the embedding and the head, plus the
//                 embedding's padded numel times pb + gb (optim_grads_params) or gb (optim_grads):
//                 it stays whole through backward.
//   moe_dispatch  on a stage with a MoE layer: all-to-all send + receive buffers, 2*R*h*a
//   logits        on the last stage: t*ceil(V/TP)*(a + 4) (the logits and their fp32 copy for
//                 the loss)
//   reserved      memory_options.reserved_bytes (CUDA context, NCCL, allocator slack)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/job_config.hpp"
#include "launcher/plan/batch_plan.hpp"
#include "launcher/plan/layout.hpp"
#include "launcher/plan/model_params.hpp"

namespace muster::launcher::plan {

// How the engine keeps the parameters under train.precision = "bf16" (under fp32 both are
// the same, 4 + 4 + 8 bytes a parameter):
//   megatron      bf16 weights (pb = 2), an fp32 main copy in the optimizer (ob = 12), grads
//                 in grad_reduce_dtype: Megatron-LM's and Megatron-FSDP's distributed optimizer
//   muster_train  fp32 weights cast by autocast where used, no copy (pb = 4, ob = 8), fp32
//                 grads (gb = 4; a grad_reduce_dtype of bf16 is a copy made to reduce): the
//                 built-in engine, muster-train; its gathers carry fp32 too
enum class weight_layout { megatron, muster_train };

// "megatron" or "muster-train" (as the program is named); throws errc::invalid_input naming
// `source` for anything else.
weight_layout parse_weight_layout(const std::string& value, const std::string& source);

// What the estimate is compared with, and the fixed overhead it adds.
struct memory_options {
  std::int64_t gpu_memory_bytes = 80LL << 30;  // one GPU's memory (H100: 80 GiB)
  std::int64_t reserved_bytes = 2LL << 30;     // CUDA context, NCCL buffers, allocator slack
  weight_layout weights = weight_layout::megatron;
};

// One rank's bytes on one pipeline stage, by category.
struct stage_memory {
  int stage = 0;
  std::int64_t params_bytes = 0;        // model parameters (in train.precision)
  std::int64_t grads_bytes = 0;         // gradients (in train.grad_reduce_dtype)
  std::int64_t optimizer_bytes = 0;     // fp32 main params (bf16) + Adam moments
  std::int64_t activations_bytes = 0;   // saved for backward, all micro-batches in flight
  std::int64_t fsdp_buffers_bytes = 0;  // all-gathered params / unsharded grads of a unit
  std::int64_t moe_dispatch_bytes = 0;  // all-to-all send and receive buffers
  std::int64_t logits_bytes = 0;        // the last stage's logits and their fp32 copy
  std::int64_t reserved_bytes = 0;      // memory_options.reserved_bytes
  double microbatches_in_flight = 0;    // f_s, interleaving included

  // Sum of the byte categories.
  std::int64_t total_bytes() const;
};

// The estimate of a job: every stage, and the worst one.
struct memory_estimate {
  stage_memory worst;                 // the stage with the largest total (the first on ties)
  std::vector<stage_memory> stages;   // stage 0 .. PP-1
  std::int64_t gpu_memory_bytes = 0;  // memory_options.gpu_memory_bytes

  // The worst stage's index.
  int stage() const { return worst.stage; }
  // The worst stage's total bytes.
  std::int64_t total_bytes() const { return worst.total_bytes(); }
  // Whether the worst stage fits the GPU.
  bool fits() const { return total_bytes() <= gpu_memory_bytes; }
  // Bytes left on the GPU at the worst stage; negative when it does not fit.
  std::int64_t margin_bytes() const { return gpu_memory_bytes - total_bytes(); }
};

// One named activation term of a layer (see the file comment).
struct activation_term {
  std::string name;             // "attention core output"
  std::int64_t bytes = 0;       // one micro-batch, one rank
  bool attention_core = false;  // not stored under selective recompute
};

// The activation terms of decoder layer `layer` for one micro-batch on one rank, as if nothing
// were recomputed. Throws errc::config for an unknown train.precision.
std::vector<activation_term> layer_activation_terms(const job_config& config, const layout& layout,
                                                    const batch_plan& batch, int layer);

// f_s: micro-batches stage `stage` holds in flight (see the file comment).
double microbatches_in_flight(const layout& layout, int grad_accum_steps, int stage);

// The estimate for every stage of `layout` (the file comment has the formulas). Throws
// errc::config naming the key for an unknown parallel.sharding, train.precision,
// train.grad_reduce_dtype or train.recompute; every other value is taken as validated.
memory_estimate estimate_memory(const job_config& config, const layout& layout,
                                const batch_plan& batch, const memory_options& options = {});

// The same with the inventory of config.model already made (make_model_params), for callers
// that estimate many layouts of one model.
memory_estimate estimate_memory(const job_config& config, const model_params& params,
                                const layout& layout, const batch_plan& batch,
                                const memory_options& options = {});

// The rows of a breakdown table, in print order: one per category of `stage`, then "total".
std::vector<std::pair<std::string, std::int64_t>> memory_rows(const stage_memory& stage);

// The worst stage's rows, then "gpu_memory" and "margin" (negative when it does not fit).
std::vector<std::pair<std::string, std::int64_t>> memory_rows(const memory_estimate& estimate);

}  // namespace muster::launcher::plan

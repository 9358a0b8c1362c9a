// The names Megatron-LM and torchrun give job keys: see job_other_names.hpp.
#include "common/job_other_names.hpp"

namespace muster {
namespace {

// docs/coming-from.md's tables, where the other tool's flag maps to one key or value.
constexpr config::other_name kOtherNames[] = {
    // torchrun
    {"nproc-per-node", "launch.nproc", "torchrun"},
    {"nnodes", "slurm.nodes", "torchrun"},
    {"master-addr", "launch.master_addr", "torchrun"},
    {"master-port", "launch.master_port", "torchrun"},
    {"max-restarts", "launch.max_restarts", "torchrun"},
    {"log-dir", "launch.runs_dir", "torchrun"},
    // Megatron-LM: layout
    {"tensor-model-parallel-size", "parallel.tensor", "Megatron"},
    {"pipeline-model-parallel-size", "parallel.pipeline", "Megatron"},
    {"num-virtual-stages-per-pipeline-rank", "parallel.virtual_pipeline", "Megatron"},
    {"decoder-first-pipeline-num-layers", "parallel.first_stage_layers", "Megatron"},
    {"decoder-last-pipeline-num-layers", "parallel.last_stage_layers", "Megatron"},
    {"context-parallel-size", "parallel.context", "Megatron"},
    {"expert-model-parallel-size", "parallel.expert", "Megatron"},
    {"expert-tensor-parallel-size", "parallel.expert_tensor", "Megatron"},
    {"use-distributed-optimizer", "parallel.sharding = \"optim\"", "Megatron"},
    {"overlap-param-gather", "parallel.fsdp_prefetch", "Megatron"},
    // model
    {"ffn-hidden-size", "model.ffn_hidden_size", "Megatron"},
    {"kv-channels", "model.head_dim", "Megatron"},
    {"qk-layernorm", "model.qk_norm", "Megatron"},
    {"add-qkv-bias", "model.attention_bias", "Megatron"},
    {"untie-embeddings-and-output-weights", "model.tie_embeddings = false", "Megatron"},
    {"rotary-base", "model.rope_theta", "Megatron"},
    {"norm-epsilon", "model.norm_eps", "Megatron"},
    {"moe-shared-expert-intermediate-size", "model.moe_shared_expert_ffn_hidden_size", "Megatron"},
    {"moe-router-score-function", "model.moe_router_score", "Megatron"},
    {"moe-expert-capacity-factor", "model.moe_capacity_factor", "Megatron"},
    // batch, precision, schedule
    {"bf16", "train.precision = \"bf16\"", "Megatron"},
    {"grad-reduce-in-bf16", "train.grad_reduce_dtype = \"bf16\"", "Megatron"},
    {"recompute-granularity", "train.recompute", "Megatron"},
    {"train-iters", "train.steps", "Megatron"},
    {"lr-warmup-iters", "train.warmup_steps", "Megatron"},
    {"clip-grad", "train.grad_clip", "Megatron"},
    {"deterministic-mode", "train.deterministic", "Megatron"},
    // data, checkpoints, timeouts
    {"data-path", "data.paths", "Megatron"},
    {"save", "checkpoint.dir", "Megatron"},
    {"load", "checkpoint.load", "Megatron"},
    {"save-interval", "checkpoint.interval", "Megatron"},
    {"no-load-optim", "checkpoint.load_optim = false", "Megatron"},
    {"distributed-timeout-minutes", "comm.timeout (in seconds)", "Megatron"},
};

}  // namespace

std::span<const config::other_name> job_other_names() {
  return kOtherNames;
}

}  // namespace muster

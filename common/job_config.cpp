// The job file's schema, loading and validation: see job_config.hpp.
#include "common/job_config.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "common/hf_config.hpp"
#include "common/job_other_names.hpp"

#include "common/config_load.hpp"
#include "common/config_reference.hpp"
#include "common/env_knobs.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/run_dir.hpp"

namespace muster {
namespace {

using config::field;
#define FIELD(member, key, doc) MUSTER_CONFIG_FIELD(job_config, member, key, doc)

const field<job_config> kSchema[] = {
    FIELD(job.name, "job.name",
          "name of the job; names its run directory (letters, digits, '.', '_', '-'; not "
          "starting with '.' or '-')"),
    FIELD(launch.nproc, "launch.nproc",
          "ranks per node; 0 means one per GPU, or 2 on a machine without GPUs"),
    FIELD(launch.runs_dir, "launch.runs_dir",
          "directory where run directories (<runs_dir>/<run_id>/) are created"),
    FIELD(launch.kill_grace, "launch.kill_grace",
          "seconds between SIGTERM and SIGKILL when the workers are stopped (Slurm's KillWait)"),
    FIELD(launch.tee, "launch.tee",
          "which ranks' output the console shows, each line prefixed [rank N]: rank0, all or "
          "none (every rank's output is always in <run_dir>/logs/rank-N.log)"),
    FIELD(launch.gpu_binding, "launch.gpu_binding",
          "which GPUs a rank sees: node (every GPU of the node, as torchrun; a program picks "
          "cuda:LOCAL_RANK) or rank (only its own, CUDA_VISIBLE_DEVICES=<its GPU>: it is cuda:0, "
          "and no rank can touch another's GPU)"),
    FIELD(launch.timeout_hang, "launch.timeout_hang",
          "seconds a rank may go without touching its heartbeat file (MUSTER_HEARTBEAT_FILE) "
          "before it is called hung and the job fails; ranks that never touch it are not "
          "watched; 0 = off. muster-train's ranks are given at least comm.timeout + 60, so its "
          "collective timeouts, which name the ranks that never arrived, come first"),
    FIELD(launch.hang_dump, "launch.hang_dump",
          "send a hung rank SIGABRT, for a core file and a stack dump (a Python rank's "
          "stacks: PYTHONFAULTHANDLER=1 is set unless set), rather than SIGTERM"),
    FIELD(launch.max_restarts, "launch.max_restarts",
          "times the ranks are restarted after a failure (under muster launch every node "
          "restarts together; TORCHELASTIC_RESTART_COUNT counts them); 0 = fail at once"),
    FIELD(launch.timeout_rendezvous, "launch.timeout_rendezvous",
          "seconds `muster launch` waits for the launcher of every node of the Slurm step to "
          "reach node 0's rendezvous store; the error lists the nodes that did not"),
    FIELD(launch.master_addr, "launch.master_addr",
          "MASTER_ADDR for the workers and the address of the rendezvous store; \"\" = the "
          "first host of the step's nodelist as Slurm names it (127.0.0.1 for muster run)"),
    FIELD(launch.master_port, "launch.master_port",
          "MASTER_PORT for the workers (rank 0's torch.distributed store); 0 = a port the "
          "kernel reports free on node 0"),
    FIELD(launch.requeue_on_signal, "launch.requeue_on_signal",
          "after a forwarded SIGUSR1/SIGUSR2 (Slurm's --signal pre-timeout warning) and the "
          "workers' exit, requeue the job (scontrol requeue $SLURM_JOB_ID); the requeued job "
          "resumes in the same run directory"),
    FIELD(parallel.allocation, "parallel.allocation",
          "AReaL allocation string instead of the sizes below: \"d4t2p2\", \"megatron:d2p2t4e4\" "
          "or \"megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)\"; \"\" = use the sizes"),
    FIELD(parallel.tensor, "parallel.tensor", "tensor-parallel size (TP)"),
    FIELD(parallel.pipeline, "parallel.pipeline", "pipeline-parallel size (PP)"),
    FIELD(parallel.virtual_pipeline, "parallel.virtual_pipeline",
          "model chunks per pipeline rank (interleaved 1F1B); 1 = not interleaved"),
    FIELD(parallel.first_stage_layers, "parallel.first_stage_layers",
          "layers on the first pipeline stage when the layers do not split evenly (Megatron's "
          "--decoder-first-pipeline-num-layers); 0 = an even split"),
    FIELD(parallel.last_stage_layers, "parallel.last_stage_layers",
          "layers on the last pipeline stage (--decoder-last-pipeline-num-layers); 0 = an even "
          "split"),
    FIELD(parallel.context, "parallel.context", "context-parallel size (CP)"),
    FIELD(parallel.expert, "parallel.expert",
          "expert-parallel size (EP); carved out of the expert-data-parallel ranks, it does not "
          "reduce the attention data-parallel size"),
    FIELD(parallel.expert_tensor, "parallel.expert_tensor",
          "expert tensor-parallel size (ETP); 0 = same as parallel.tensor"),
    FIELD(parallel.data, "parallel.data",
          "data-parallel size (DP); 0 = derived: world / (tensor * pipeline * context)"),
    FIELD(parallel.sequence_parallel, "parallel.sequence_parallel",
          "sequence parallelism: shard the activations outside attention and MLP over TP"),
    FIELD(parallel.order, "parallel.order",
          "rank order of the parallel dimensions, fastest-varying first (Megatron-Core's "
          "order: tp-cp-ep-dp-pp or tp-cp-pp-ep-dp ...)"),
    FIELD(parallel.sharding, "parallel.sharding",
          "data-parallel sharding: no_shard, optim (ZeRO-1), optim_grads (ZeRO-2) or "
          "optim_grads_params (ZeRO-3 / FSDP)"),
    FIELD(parallel.fsdp_prefetch, "parallel.fsdp_prefetch",
          "optim_grads_params: start the all-gather of the next layer's parameters (in forward, "
          "and of the layer before in backward) while this one computes, so two layers' "
          "parameters are gathered at once; false gathers each when it is used (less memory, "
          "no overlap)"),
    FIELD(parallel.overlap_grad_reduce, "parallel.overlap_grad_reduce",
          "optim, optim_grads and optim_grads_params: leave each layer's gradient reduce-scatter "
          "running while the layer below computes its backward (optim: in the step's last "
          "micro-batch), so under optim_grads and up two layers' whole gradients exist at once; "
          "false waits for each as the layer's backward ends (optim: all at the step's end)"),
    FIELD(model.config_json, "model.config_json",
          "Hugging Face config.json (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2/V3) whose sizes "
          "fill the model keys; model keys this file sets to other than their default, and "
          "every key on the command line, win; a relative path is read from the job file's "
          "directory"),
    FIELD(model.num_layers, "model.num_layers", "transformer layers"),
    FIELD(model.hidden_size, "model.hidden_size", "hidden size"),
    FIELD(model.ffn_hidden_size, "model.ffn_hidden_size", "SwiGLU hidden size of dense layers"),
    FIELD(model.num_attention_heads, "model.num_attention_heads", "query heads"),
    FIELD(model.num_query_groups, "model.num_query_groups",
          "key/value heads (grouped-query attention); equal to the heads for multi-head"),
    FIELD(model.head_dim, "model.head_dim", "size of one head; 0 = hidden_size / heads"),
    FIELD(model.vocab_size, "model.vocab_size", "rows of the embedding and the output head"),
    FIELD(model.qk_norm, "model.qk_norm", "RMSNorm on each head's query and key (Qwen3)"),
    FIELD(model.attention_bias, "model.attention_bias", "bias on the q/k/v projections (Qwen2)"),
    FIELD(model.tie_embeddings, "model.tie_embeddings", "the output head shares the embedding"),
    FIELD(model.q_lora_rank, "model.q_lora_rank",
          "multi-latent attention (DeepSeek-V2/V3): query low-rank size; 0 = full-rank query"),
    FIELD(model.kv_lora_rank, "model.kv_lora_rank",
          "multi-latent attention: key/value low-rank size; 0 = grouped-query attention"),
    FIELD(model.qk_rope_head_dim, "model.qk_rope_head_dim",
          "multi-latent attention: rotary part of each query/key head (head_dim is the rest)"),
    FIELD(model.v_head_dim, "model.v_head_dim", "multi-latent attention: value head size"),
    FIELD(model.num_experts, "model.num_experts", "routed experts per MoE layer; 0 = dense model"),
    FIELD(model.moe_ffn_hidden_size, "model.moe_ffn_hidden_size",
          "SwiGLU hidden size of one routed expert"),
    FIELD(model.moe_router_topk, "model.moe_router_topk", "experts each token is routed to"),
    FIELD(model.moe_shared_expert_ffn_hidden_size, "model.moe_shared_expert_ffn_hidden_size",
          "SwiGLU hidden size of the shared experts together; 0 = no shared expert"),
    FIELD(model.moe_shared_expert_gate, "model.moe_shared_expert_gate",
          "sigmoid gate on the shared expert's output (Qwen2-MoE)"),
    FIELD(model.moe_first_dense_layers, "model.moe_first_dense_layers",
          "leading layers that are dense (DeepSeek's first_k_dense_replace)"),
    FIELD(model.moe_layer_freq, "model.moe_layer_freq",
          "after the leading dense layers, every n-th layer is MoE (1 = all)"),
    FIELD(model.moe_capacity_factor, "model.moe_capacity_factor",
          "expert capacity as a multiple of the balanced load; 0 = dropless"),
    FIELD(model.moe_router_score, "model.moe_router_score",
          "router score function: softmax (Mixtral, Qwen) or sigmoid (DeepSeek-V3)"),
    FIELD(model.moe_router_topk_norm, "model.moe_router_topk_norm",
          "scale each token's top-k router weights to sum to 1 (Hugging Face norm_topk_prob)"),
    FIELD(model.moe_aux_loss_coeff, "model.moe_aux_loss_coeff",
          "weight of the load-balancing loss (Switch/GShard form, Megatron's moe_aux_loss_coeff)"),
    FIELD(model.moe_z_loss_coeff, "model.moe_z_loss_coeff",
          "weight of the router z-loss, mean squared logsumexp of the router logits; 0 = off"),
    FIELD(model.rope_theta, "model.rope_theta", "base of the rotary position embedding"),
    FIELD(model.norm_eps, "model.norm_eps", "epsilon of every RMSNorm"),
    FIELD(train.micro_batch_size, "train.micro_batch_size",
          "sequences (or packs) per rank in one forward/backward"),
    FIELD(train.global_batch_size, "train.global_batch_size",
          "sequences per optimizer step over all ranks; 0 = micro_batch_size * grad_accum_steps "
          "* data-parallel size"),
    FIELD(train.grad_accum_steps, "train.grad_accum_steps",
          "micro-batches per optimizer step on each data-parallel rank (derived when "
          "train.global_batch_size is set)"),
    FIELD(train.seq_length, "train.seq_length", "tokens per sequence"),
    FIELD(train.max_tokens_per_pack, "train.max_tokens_per_pack",
          "pack documents into rows of this many tokens (attention stays inside each document); "
          "0 = no packing"),
    FIELD(train.precision, "train.precision",
          "bf16 (bf16 params and activations, fp32 main params and Adam moments) or fp32"),
    FIELD(train.device, "train.device",
          "where muster-train computes: auto (a CUDA device when its LibTorch has CUDA and one is "
          "visible, else the CPU), cuda or cpu"),
    FIELD(train.grad_reduce_dtype, "train.grad_reduce_dtype",
          "type gradients are accumulated and reduced in: fp32 or bf16"),
    FIELD(train.recompute, "train.recompute",
          "activation recompute: none, selective (attention core) or full (whole layer)"),
    FIELD(train.expert_gemm, "train.expert_gemm",
          "how muster-train runs the experts' products on a GPU: auto (by their sizes), grouped "
          "(one cuBLAS grouped call, cuBLAS 12.5 or later), per_expert (one product an expert) or "
          "split (uniform batches of the rows most experts share, then one grouped call for the "
          "rest; the weights' gradients split along the rows too, so under bf16 their sums are "
          "rounded once more), or sm90 (muster's own Hopper kernel for the bf16 forward, dgrad "
          "and wgrad where it takes them, else auto; not yet run on a GPU); the CPU has one way"),
    FIELD(train.steps, "train.steps", "optimizer steps of the run"),
    FIELD(train.lr, "train.lr", "peak learning rate (AdamW)"),
    FIELD(train.min_lr, "train.min_lr", "learning rate at the end of the cosine decay"),
    FIELD(train.warmup_steps, "train.warmup_steps", "steps of linear warmup from 0 to train.lr"),
    FIELD(train.weight_decay, "train.weight_decay",
          "AdamW's decoupled weight decay (not on norm weights or biases)"),
    FIELD(train.adam_beta1, "train.adam_beta1", "AdamW's first-moment decay"),
    FIELD(train.adam_beta2, "train.adam_beta2", "AdamW's second-moment decay"),
    FIELD(train.adam_eps, "train.adam_eps", "AdamW's epsilon"),
    FIELD(train.grad_clip, "train.grad_clip",
          "clip the global gradient norm (over all shards) to this; 0 = off"),
    FIELD(train.seed, "train.seed",
          "seed of the initial weights and the data order (the same for any parallel layout)"),
    FIELD(train.peak_tflops, "train.peak_tflops",
          "one rank's peak TFLOP/s for the MFU of each step; 0 = measured by a matmul at start"),
    FIELD(train.deterministic, "train.deterministic",
          "only deterministic kernels: a run repeats bit for bit, and an op without a "
          "deterministic kernel fails naming itself (torch.use_deterministic_algorithms)"),
    FIELD(train.profile_step_start, "train.profile_step_start",
          "profile steps profile_step_start..profile_step_end (numbered from 1, as logged) with "
          "PyTorch's profiler: each rank's busiest ops and CUDA kernels in its log and in "
          "<run directory>/profile/rank-N.txt, and a Chrome trace rank-N.json where its LibTorch "
          "has Kineto; 0 = off"),
    FIELD(train.profile_step_end, "train.profile_step_end",
          "the last step profiled; 0 = train.profile_step_start alone"),
    FIELD(data.paths, "data.paths",
          "text files or folders of them (format text), or .bin/.idx prefixes (format indexed); a "
          "relative path is from the directory muster runs in"),
    FIELD(data.format, "data.format",
          "text (byte-level tokens, vocabulary 256) or indexed (Megatron's MMapIndexedDataset)"),
    FIELD(checkpoint.dir, "checkpoint.dir",
          "where checkpoints are saved, one directory per step (step-00000100); \"\" = "
          "<run directory>/checkpoints; a relative path is from the directory muster runs in"),
    FIELD(checkpoint.interval, "checkpoint.interval",
          "save every this many steps; 0 = none between; either way after the last step and "
          "when the launcher forwards SIGUSR1 or SIGTERM (Slurm's pre-timeout signal, scancel); "
          "-1 = only when signalled"),
    FIELD(checkpoint.load, "checkpoint.load",
          "\"\" = resume from the newest checkpoint in checkpoint.dir when there is one; else "
          "a checkpoint directory to start from (ours, or a Hugging Face model directory), or the "
          "folder our step-N directories are in, for the newest of them (as Megatron's --load); a "
          "relative path is from the directory muster runs in. A "
          "resume whose learning-rate schedule (train.steps, warmup_steps, lr, min_lr) differs "
          "from the checkpoint's warns in the ranks' logs and goes on with this run's"),
    FIELD(checkpoint.keep, "checkpoint.keep", "newest checkpoints kept in checkpoint.dir; 0 = all"),
    FIELD(checkpoint.load_optim, "checkpoint.load_optim",
          "resume the optimizer state too; false = the weights and the step alone, with a fresh "
          "optimizer (Megatron's --no-load-optim): to resume under another world size, sharding "
          "or parallel.expert than the checkpoint's, whose optimizer state is sharded for its "
          "own"),
    FIELD(comm.nccl_ub, "comm.nccl_ub",
          "NCCL user buffers (ncclMemAlloc + ncclCommRegister) for the FSDP all-gather and "
          "reduce-scatter buffers; refused together with expandable_segments:True"),
    FIELD(comm.timeout, "comm.timeout",
          "seconds a collective waits for every rank before the rank fails, naming the ranks "
          "that never arrived (torch's process-group timeout)"),
    FIELD(slurm.nodes, "slurm.nodes", "nodes muster-sbatch asks for (one muster launch task each)"),
    FIELD(slurm.gpus_per_node, "slurm.gpus_per_node",
          "GPUs per node muster-sbatch asks for (--gpus-per-node); 0 = none"),
    FIELD(slurm.cpus_per_task, "slurm.cpus_per_task",
          "CPUs muster-sbatch asks for each node's launcher task, which all the node's ranks "
          "share (--cpus-per-task, given to srun too); 0 = Slurm's default (one, unless the "
          "site sets DefCpuPerGPU or gives whole nodes)"),
    FIELD(slurm.time, "slurm.time",
          "time limit (--time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. "
          "\"4:00:00\" or \"1-00:00:00\"), or UNLIMITED; \"\" = the partition's default"),
    FIELD(slurm.partition, "slurm.partition",
          "partition (--partition); \"\" = the cluster's default"),
    FIELD(slurm.account, "slurm.account", "account (--account); \"\" = the user's default"),
    FIELD(slurm.checkpoint_lead, "slurm.checkpoint_lead",
          "seconds before the time limit Slurm sends USR1 (--signal=B:USR1@N), which the "
          "launchers pass to every worker to checkpoint; 0 = none"),
    FIELD(slurm.requeue, "slurm.requeue",
          "--requeue, and after the pre-timeout checkpoint the job requeues itself and resumes "
          "in the same run directory (sets launch.requeue_on_signal)"),
    FIELD(log.level, "log.level",
          "log level: trace, debug, info, warn, error, critical or off (MUSTER_LOG_LEVEL wins)"),
};

#undef FIELD

// What the key's least value means, from its documentation ("0 = all"), or "".
std::string least_meaning(int min, std::string_view key) {
  for (const auto& f : kSchema) {
    if (f.key != key) continue;
    const auto mark = fmt::format("{} = ", min);
    auto at = f.doc.find(mark);
    while (at != std::string_view::npos && at > 0 && f.doc[at - 1] != ' ' && f.doc[at - 1] != '(')
      at = f.doc.find(mark, at + 1);  // "-1 = " is not "1 = "
    if (at == std::string_view::npos) return {};
    // to the clause's end: a ';', or a ')' that closes what was open before it
    std::size_t end = at;
    for (int depth = 0; end < f.doc.size(); ++end) {
      const char c = f.doc[end];
      if (c == ';' || (c == ')' && depth == 0)) break;
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    }
    return std::string(f.doc.substr(at, end - at));
  }
  return {};
}

// A whole number of at least `min`; the message says what the least means where the key's
// documentation does.
void check_at_least(int value, int min, const config::sources& where, std::string_view key) {
  const auto meaning = value < min ? least_meaning(min, key) : std::string();
  MUSTER_CHECK(value >= min, errc::config, "{}: {}: {} is below {}; use {} or more{}",
               config::place_of(where, key), key, value, min, min,
               meaning.empty() ? "" : " (" + meaning + ")");
}

// other_names: what other tools call a choice (any case), named in the message.
void check_choice(
    const std::string& value, std::initializer_list<std::string_view> choices,
    const config::sources& where, std::string_view key,
    std::initializer_list<std::pair<std::string_view, std::string_view>> other_names = {}) {
  for (auto choice : choices)
    if (value == choice) return;
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (auto [other, choice] : other_names)
    if (lower == other)
      MUSTER_THROW(errc::config, "{}: {}: \"{}\" is called {} here; write {} = \"{}\"",
                   config::place_of(where, key), key, value, choice, key, choice);
  MUSTER_THROW(errc::config, "{}: {}: unknown value \"{}\"; use one of {}",
               config::place_of(where, key), key, value, fmt::join(choices, ", "));
}

// Megatron-Core's order (initialize_model_parallel's order=): names of tp, cp, ep, dp and pp joined
// by '-', each at most once, in any case. A name left out must have size 1 (the planner checks that
// against the layout).
void check_order(const std::string& order, const config::sources& where) {
  static const std::vector<std::string> kNames = {"tp", "cp", "ep", "dp", "pp"};
  std::vector<std::string> seen;
  for (std::size_t begin = 0; begin <= order.size();) {
    auto end = std::min(order.find('-', begin), order.size());
    std::string name = order.substr(begin, end - begin);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    bool known = std::find(kNames.begin(), kNames.end(), name) != kNames.end();
    bool repeated = std::find(seen.begin(), seen.end(), name) != seen.end();
    MUSTER_CHECK(known && !repeated, errc::config,
                 "{}: parallel.order: \"{}\": \"{}\" is {}; use tp, cp, ep, dp and pp, each "
                 "at most once, joined by '-', e.g. parallel.order = \"tp-cp-ep-dp-pp\"",
                 config::place_of(where, "parallel.order"), order, name,
                 known ? "given twice" : "not a dimension");
    seen.push_back(name);
    begin = end + 1;
  }
}

// One section's rules, every broken one kept: r(rule) runs a rule that throws errc::config when
// broken. A section's later rules may rest on its earlier ones (a division by a size checked to
// be 1 or more): it returns before them unless held().
class section_rules {
 public:
  explicit section_rules(std::vector<std::string>& broken) : broken_(broken), at_(broken.size()) {}

  template <class Rule>
  void operator()(const Rule& rule) {
    try {
      rule();
    } catch (const error& e) {
      broken_.push_back(e.what());
    }
  }
  bool held() const { return broken_.size() == at_; }

 private:
  std::vector<std::string>& broken_;
  std::size_t at_;
};

void validate_parallel(const parallel_section& p, const config::sources& where, section_rules& r) {
  for (auto [value, key] : {std::pair{p.tensor, "parallel.tensor"},
                            {p.pipeline, "parallel.pipeline"},
                            {p.virtual_pipeline, "parallel.virtual_pipeline"},
                            {p.context, "parallel.context"},
                            {p.expert, "parallel.expert"}})
    r([&] { check_at_least(value, 1, where, key); });
  r([&] { check_at_least(p.expert_tensor, 0, where, "parallel.expert_tensor"); });
  r([&] { check_at_least(p.first_stage_layers, 0, where, "parallel.first_stage_layers"); });
  r([&] { check_at_least(p.last_stage_layers, 0, where, "parallel.last_stage_layers"); });
  r([&] { check_at_least(p.data, 0, where, "parallel.data"); });
  r([&] { check_order(p.order, where); });
  // DeepSpeed's ZeRO stages and torch FSDP's strategies by their names
  r([&] {
    check_choice(p.sharding, {"no_shard", "optim", "optim_grads", "optim_grads_params"}, where,
                 "parallel.sharding",
                 {{"zero1", "optim"},
                  {"zero-1", "optim"},
                  {"zero_1", "optim"},
                  {"zero2", "optim_grads"},
                  {"zero-2", "optim_grads"},
                  {"zero_2", "optim_grads"},
                  {"shard_grad_op", "optim_grads"},
                  {"zero3", "optim_grads_params"},
                  {"zero-3", "optim_grads_params"},
                  {"zero_3", "optim_grads_params"},
                  {"full_shard", "optim_grads_params"},
                  {"fsdp", "optim_grads_params"},
                  {"zero0", "no_shard"},
                  {"ddp", "no_shard"}});
  });
}

void validate_model(const model_section& m, const config::sources& where, section_rules& r) {
  for (auto [value, key] : {std::pair{m.num_layers, "model.num_layers"},
                            {m.hidden_size, "model.hidden_size"},
                            {m.ffn_hidden_size, "model.ffn_hidden_size"},
                            {m.num_attention_heads, "model.num_attention_heads"},
                            {m.num_query_groups, "model.num_query_groups"},
                            {m.vocab_size, "model.vocab_size"},
                            {m.moe_layer_freq, "model.moe_layer_freq"}})
    r([&] { check_at_least(value, 1, where, key); });
  for (auto [value, key] :
       {std::pair{m.head_dim, "model.head_dim"},
        {m.q_lora_rank, "model.q_lora_rank"},
        {m.kv_lora_rank, "model.kv_lora_rank"},
        {m.qk_rope_head_dim, "model.qk_rope_head_dim"},
        {m.v_head_dim, "model.v_head_dim"},
        {m.num_experts, "model.num_experts"},
        {m.moe_shared_expert_ffn_hidden_size, "model.moe_shared_expert_ffn_hidden_size"},
        {m.moe_first_dense_layers, "model.moe_first_dense_layers"}})
    r([&] { check_at_least(value, 0, where, key); });
  if (!r.held()) return;  // the rules below divide by those sizes
  r([&] {
    MUSTER_CHECK(m.head_dim > 0 || m.hidden_size % m.num_attention_heads == 0, errc::config,
                 "{}: model.num_attention_heads: {} does not divide model.hidden_size {}; set "
                 "model.head_dim, or use heads that divide the hidden size",
                 config::place_of(where, "model.num_attention_heads"), m.num_attention_heads,
                 m.hidden_size);
  });
  r([&] {
    MUSTER_CHECK(m.num_attention_heads % m.num_query_groups == 0, errc::config,
                 "{}: model.num_query_groups: {} does not divide the {} attention heads; use a "
                 "divisor of model.num_attention_heads",
                 config::place_of(where, "model.num_query_groups"), m.num_query_groups,
                 m.num_attention_heads);
  });
  r([&] {
    if (m.kv_lora_rank > 0)
      MUSTER_CHECK(m.qk_rope_head_dim > 0 && m.v_head_dim > 0, errc::config,
                   "{}: model.kv_lora_rank: multi-latent attention needs model.qk_rope_head_dim "
                   "and model.v_head_dim too (DeepSeek-V3: 64 and 128)",
                   config::place_of(where, "model.kv_lora_rank"));
  });
  r([&] {
    if (m.num_experts > 0) {
      check_at_least(m.moe_ffn_hidden_size, 1, where, "model.moe_ffn_hidden_size");
      MUSTER_CHECK(m.moe_router_topk >= 1 && m.moe_router_topk <= m.num_experts, errc::config,
                   "{}: model.moe_router_topk: {} is not between 1 and the {} experts",
                   config::place_of(where, "model.moe_router_topk"), m.moe_router_topk,
                   m.num_experts);
    }
  });
  r([&] {
    MUSTER_CHECK(m.moe_capacity_factor == 0.0 || m.moe_capacity_factor >= 1.0, errc::config,
                 "{}: model.moe_capacity_factor: {} drops tokens even when the load is balanced; "
                 "use 0 (dropless) or 1.0 or more",
                 config::place_of(where, "model.moe_capacity_factor"), m.moe_capacity_factor);
  });
  r([&] {
    check_choice(m.moe_router_score, {"softmax", "sigmoid"}, where, "model.moe_router_score");
  });
  r([&] {
    MUSTER_CHECK(m.moe_aux_loss_coeff >= 0.0 && m.moe_z_loss_coeff >= 0.0, errc::config,
                 "{}: model.moe_aux_loss_coeff and model.moe_z_loss_coeff must be 0 or more "
                 "(found {} and {})",
                 config::place_of(where, m.moe_aux_loss_coeff < 0.0 ? "model.moe_aux_loss_coeff"
                                                                    : "model.moe_z_loss_coeff"),
                 m.moe_aux_loss_coeff, m.moe_z_loss_coeff);
  });
  r([&] {
    MUSTER_CHECK(m.rope_theta > 1.0, errc::config,
                 "{}: model.rope_theta: {} must be more than 1 (10000 for Llama-2, 1000000 for "
                 "Qwen3 and Mixtral)",
                 config::place_of(where, "model.rope_theta"), m.rope_theta);
  });
  r([&] {
    MUSTER_CHECK(m.norm_eps > 0.0 && m.norm_eps < 1.0, errc::config,
                 "{}: model.norm_eps: {} must be in (0, 1), e.g. 1e-6",
                 config::place_of(where, "model.norm_eps"), m.norm_eps);
  });
}

void validate_train(const train_section& t, const config::sources& where, section_rules& r) {
  r([&] { check_at_least(t.micro_batch_size, 1, where, "train.micro_batch_size"); });
  r([&] { check_at_least(t.global_batch_size, 0, where, "train.global_batch_size"); });
  r([&] { check_at_least(t.grad_accum_steps, 1, where, "train.grad_accum_steps"); });
  r([&] { check_at_least(t.seq_length, 1, where, "train.seq_length"); });
  r([&] { check_at_least(t.max_tokens_per_pack, 0, where, "train.max_tokens_per_pack"); });
  r([&] { check_choice(t.precision, {"bf16", "fp32"}, where, "train.precision"); });
  r([&] { check_choice(t.device, {"auto", "cuda", "cpu"}, where, "train.device"); });
  r([&] { check_choice(t.grad_reduce_dtype, {"fp32", "bf16"}, where, "train.grad_reduce_dtype"); });
  r([&] { check_choice(t.recompute, {"none", "selective", "full"}, where, "train.recompute"); });
  r([&] {
    check_choice(t.expert_gemm, {"auto", "grouped", "per_expert", "split", "sm90"}, where,
                 "train.expert_gemm");
  });
  r([&] { check_at_least(t.steps, 1, where, "train.steps"); });
  r([&] { check_at_least(t.warmup_steps, 0, where, "train.warmup_steps"); });
  r([&] { check_at_least(t.profile_step_start, 0, where, "train.profile_step_start"); });
  r([&] {
    MUSTER_CHECK(t.lr > 0 && t.min_lr >= 0 && t.min_lr <= t.lr, errc::config,
                 "{}: train.lr = {} and train.min_lr = {}: need 0 < min_lr <= lr (e.g. lr 3e-4, "
                 "min_lr 3e-5)",
                 config::place_of(where, "train.lr"), t.lr, t.min_lr);
  });
  // each its own rule, so every one out of range is named at its own line
  for (const auto& [value, key] :
       {std::pair{t.adam_beta1, "train.adam_beta1"}, std::pair{t.adam_beta2, "train.adam_beta2"}})
    r([&, value = value, key = key] {
      MUSTER_CHECK(value >= 0 && value < 1, errc::config,
                   "{}: {}: {} is outside [0, 1) (0.9 and 0.95 are usual)",
                   config::place_of(where, key), key, value);
    });
  r([&] {
    MUSTER_CHECK(t.adam_eps > 0, errc::config,
                 "{}: train.adam_eps: {} must be above 0 (1e-8 is "
                 "usual)",
                 config::place_of(where, "train.adam_eps"), t.adam_eps);
  });
  for (const auto& [value, key] :
       {std::pair{t.weight_decay, "train.weight_decay"}, std::pair{t.grad_clip, "train.grad_clip"},
        std::pair{t.peak_tflops, "train.peak_tflops"}})
    r([&, value = value, key = key] {
      MUSTER_CHECK(value >= 0, errc::config, "{}: {}: {} is negative; use 0 or more{}",
                   config::place_of(where, key), key, value, [&] {
                     const auto m = least_meaning(0, key);
                     return m.empty() ? std::string() : " (" + m + ")";
                   }());
    });
  r([&] {  // (a train.steps or profile_step_start out of range is said above)
    MUSTER_CHECK(
        t.steps < 1 || t.profile_step_start < 0 || t.profile_step_start <= t.steps, errc::config,
        "{}: train.profile_step_start = {} is past the run's last step (train.steps = {}); "
        "profile a step of the run, or set train.profile_step_start = 0",
        config::place_of(where, "train.profile_step_start"), t.profile_step_start, t.steps);
  });
  r([&] {
    MUSTER_CHECK(t.profile_step_end == 0 ||
                     (t.profile_step_start > 0 && t.profile_step_end >= t.profile_step_start),
                 errc::config,
                 "{}: train.profile_step_end = {} with train.profile_step_start = {}: the last "
                 "profiled step must be at or after the first, which must be set (e.g. start 5, "
                 "end 7); or set train.profile_step_end = 0",
                 config::place_of(where, "train.profile_step_end"), t.profile_step_end,
                 t.profile_step_start);
  });
}

void validate_checkpoint(const checkpoint_section& c, const config::sources& where,
                         section_rules& r) {
  r([&] { check_at_least(c.interval, -1, where, "checkpoint.interval"); });
  r([&] { check_at_least(c.keep, 0, where, "checkpoint.keep"); });
}

void validate_comm(const comm_section& c, const config::sources& where, section_rules& r) {
  r([&] { check_at_least(c.timeout, 1, where, "comm.timeout"); });
}

void validate_slurm(const slurm_section& s, const config::sources& where, section_rules& r) {
  r([&] { check_at_least(s.nodes, 1, where, "slurm.nodes"); });
  r([&] { check_at_least(s.gpus_per_node, 0, where, "slurm.gpus_per_node"); });
  r([&] { check_at_least(s.cpus_per_task, 0, where, "slurm.cpus_per_task"); });
  r([&] { check_at_least(s.checkpoint_lead, 0, where, "slurm.checkpoint_lead"); });
  r([&] {
    MUSTER_CHECK(s.time.empty() || slurm_time_seconds(s.time), errc::config,
                 "{}: slurm.time: \"{}\" is not a Slurm time limit; use minutes (\"90\"), MM:SS, "
                 "HH:MM:SS (\"4:00:00\"), D-HH, D-HH:MM or D-HH:MM:SS (\"1-00:00:00\"), "
                 "\"UNLIMITED\", or \"\" for the partition's default",
                 config::place_of(where, "slurm.time"), s.time);
  });
  r([&] {
    for (auto [key, value] :
         {std::pair{"slurm.partition", &s.partition}, std::pair{"slurm.account", &s.account}})
      MUSTER_CHECK(value->find_first_of(" \t\n'\"\\$`;&|<>") == std::string::npos, errc::config,
                   "{}: {}: \"{}\" holds a space or a shell character; Slurm names have none "
                   "(e.g. \"gpu\")",
                   config::place_of(where, key), key, *value);
  });
}

void validate_data(const data_section& d, const config::sources& where, section_rules& r) {
  r([&] { check_choice(d.format, {"text", "indexed"}, where, "data.format"); });
  r([&] {
    MUSTER_CHECK(!d.paths.empty(), errc::config,
                 "{}: data.paths is empty; name the text files or .bin/.idx prefixes to train on",
                 config::place_of(where, "data.paths"));
  });
}

// Model keys the job file sets to their default value are treated as not set, so that
// config.json fills them: a job file started from the example (which lists every key) must not
// hide the config.json behind its defaults. Values that differ, and the command line, win.
void forget_default_model_keys(job_config& config, config::sources& where) {
  job_config defaults;
  auto fields = config::bind_fields(config, kSchema);
  auto default_fields = config::bind_fields(defaults, kSchema);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    std::string key(fields[i].key);
    auto it = where.find(key);
    if (!key.starts_with("model.") || key == "model.config_json" || it == where.end()) continue;
    if (it->second.starts_with("command line")) continue;
    if (config::format_value(fields[i].value) == config::format_value(default_fields[i].value))
      where.erase(it);
  }
}

// A field of a Slurm time: digits, at most 9 (no overflow); nothing otherwise.
std::optional<std::int64_t> time_field(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

std::int64_t suggested_checkpoint_lead(std::int64_t limit_s) {
  return std::clamp<std::int64_t>((limit_s + 59) / 60 * 60 / 4, 1, 300);
}

std::optional<std::int64_t> slurm_time_seconds(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "UNLIMITED" || upper == "INFINITE" || upper == "-1") return 0;
  std::optional<std::int64_t> days;
  if (const auto dash = text.find('-'); dash != std::string_view::npos) {
    days = time_field(text.substr(0, dash));
    if (!days) return std::nullopt;
    text.remove_prefix(dash + 1);
  }
  std::vector<std::int64_t> fields;  // split at ':'
  for (;;) {
    const auto colon = text.find(':');
    const auto field = time_field(text.substr(0, colon));
    if (!field || fields.size() == 3) return std::nullopt;
    fields.push_back(*field);
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  // after days: HH[:MM[:SS]]; without: MM, MM:SS or HH:MM:SS
  if (!days && fields.size() < 3) fields.insert(fields.begin(), 0);
  fields.resize(3, 0);
  return days.value_or(0) * 86400 + fields[0] * 3600 + fields[1] * 60 + fields[2];
}

std::span<const config::field<job_config>> job_config_schema() {
  return kSchema;
}

void validate_launch(const job_config& c, const config::sources& where, section_rules& r) {
  using config::place_of;
  r([&] {
    try {
      store::check_file_component("the name", c.job.name);  // it names the run directory
    } catch (const error& e) {
      MUSTER_THROW(errc::config, "{}: job.name: {}; e.g. job.name = \"moe-pretrain\"",
                   place_of(where, "job.name"), e.what());
    }
  });
  r([&] {
    MUSTER_CHECK(c.launch.nproc >= 0, errc::config,
                 "{}: launch.nproc: {} is negative; use the number of ranks per node, or 0 for one "
                 "per GPU",
                 place_of(where, "launch.nproc"), c.launch.nproc);
  });
  r([&] { check_at_least(c.launch.kill_grace, 0, where, "launch.kill_grace"); });
  r([&] { check_at_least(c.launch.timeout_hang, 0, where, "launch.timeout_hang"); });
  r([&] { check_at_least(c.launch.max_restarts, 0, where, "launch.max_restarts"); });
  r([&] { check_at_least(c.launch.timeout_rendezvous, 1, where, "launch.timeout_rendezvous"); });
  r([&] {
    MUSTER_CHECK(c.launch.master_port >= 0 && c.launch.master_port <= 65535, errc::config,
                 "{}: launch.master_port: {} is not a TCP port; use 1-65535, or 0 to let muster "
                 "pick a free one",
                 place_of(where, "launch.master_port"), c.launch.master_port);
  });
  r([&] { check_choice(c.launch.tee, {"rank0", "all", "none"}, where, "launch.tee"); });
  r([&] { check_choice(c.launch.gpu_binding, {"node", "rank"}, where, "launch.gpu_binding"); });
  r([&] {
    MUSTER_CHECK(!c.launch.runs_dir.empty(), errc::config,
                 "{}: launch.runs_dir is empty; name a directory, e.g. launch.runs_dir = "
                 "\"./muster-runs\"",
                 place_of(where, "launch.runs_dir"));
  });
  r([&] {
    log::check_level(c.log.level, errc::config,
                     fmt::format("{}: log.level", place_of(where, "log.level")));
  });
}

// Every section's rules, the broken ones listed together (a section's rules that rest on others
// wait for those: section_rules).
void validate(const job_config& c, const config::sources& where) {
  std::vector<std::string> broken;
  const auto check = [&](auto&& validate_section) {
    section_rules rules(broken);
    validate_section(rules);
  };
  check([&](section_rules& r) { validate_launch(c, where, r); });
  check([&](section_rules& r) { validate_parallel(c.parallel, where, r); });
  check([&](section_rules& r) { validate_model(c.model, where, r); });
  check([&](section_rules& r) { validate_train(c.train, where, r); });
  check([&](section_rules& r) { validate_data(c.data, where, r); });
  check([&](section_rules& r) { validate_checkpoint(c.checkpoint, where, r); });
  check([&](section_rules& r) { validate_comm(c.comm, where, r); });
  check([&](section_rules& r) { validate_slurm(c.slurm, where, r); });
  if (broken.size() == 1) MUSTER_THROW(errc::config, "{}", broken.front());
  MUSTER_CHECK(broken.empty(), errc::config, "the job has {} problems:\n  {}", broken.size(),
               fmt::join(broken, "\n  "));
}

namespace {

// load_job_config's relative path keys, made absolute from the current directory.
void make_paths_absolute(loaded_job_config& loaded) {
  const auto absolute = [&](std::string& path, const char* key) {
    if (path.empty() || std::filesystem::path(path).is_absolute()) return;
    path = std::filesystem::absolute(path).lexically_normal().string();
    if (std::find(loaded.made_absolute.begin(), loaded.made_absolute.end(), key) ==
        loaded.made_absolute.end())
      loaded.made_absolute.emplace_back(key);
  };
  for (auto& path : loaded.config.data.paths) absolute(path, "data.paths");
  absolute(loaded.config.checkpoint.dir, "checkpoint.dir");
  absolute(loaded.config.checkpoint.load, "checkpoint.load");
}

}  // namespace

loaded_job_config load_job_config(const std::filesystem::path& file,
                                  std::span<const std::string> overrides) {
  loaded_job_config loaded;
  auto fields = config::bind_fields(loaded.config, job_config_schema());
  config::file_kind kind;
  kind.other_names = job_other_names();
  if (!file.empty()) config::load_file(file, fields, loaded.where, kind);
  // every override's mistake at once, as a file's are
  std::vector<std::string> wrong;
  for (const auto& assignment : overrides) {
    try {
      config::apply_override(assignment, fields, loaded.where, job_other_names());
    } catch (const error& e) {
      if (e.category() != errc::config) throw;
      wrong.emplace_back(e.what());
    }
  }
  if (wrong.size() == 1) MUSTER_THROW(errc::config, "{}", wrong.front());
  MUSTER_CHECK(wrong.empty(), errc::config, "the command line has {} problems:\n  {}", wrong.size(),
               fmt::join(wrong, "\n  "));
  // where the runs go when neither says: where status, diagnose and report look for them
  if (const auto runs = env_value(kEnvRunsDir);
      runs && !runs->empty() && !loaded.where.count("launch.runs_dir")) {
    loaded.config.launch.runs_dir = *runs;
    loaded.where["launch.runs_dir"] = fmt::format("{}={} in the environment", kEnvRunsDir, *runs);
  }
  make_paths_absolute(loaded);
  if (!loaded.config.model.config_json.empty()) {
    std::filesystem::path json = loaded.config.model.config_json;
    bool from_file = std::none_of(overrides.begin(), overrides.end(), [](const std::string& o) {
      return o.starts_with("model.config_json=");
    });
    if (json.is_relative() && from_file && !file.empty()) json = file.parent_path() / json;
    // absolute, so the copy in the run directory that the ranks read finds the same file
    json = std::filesystem::absolute(json).lexically_normal();
    loaded.config.model.config_json = json.string();
    const std::string place = config::place_of(loaded.where, "model.config_json");
    forget_default_model_keys(loaded.config, loaded.where);
    try {
      apply_hf_config(json, loaded.config.model, loaded.where);
    } catch (const error& e) {
      MUSTER_THROW(errc::config, "{}: model.config_json: {}", place, e.what());
    }
  }
  validate(loaded.config, loaded.where);
  return loaded;
}

std::vector<std::string> made_absolute_overrides(const loaded_job_config& loaded) {
  job_config copy = loaded.config;  // bind_fields needs a mutable object
  const auto fields = config::bind_fields(copy, job_config_schema());
  std::vector<std::string> out;
  for (const auto& key : loaded.made_absolute)
    for (const auto& f : fields)
      if (f.key == key) out.push_back(fmt::format("{}={}", key, config::format_value(f.value)));
  return out;
}

std::string to_toml(const job_config& config, bool with_docs, const config::sources* origins) {
  job_config copy = config;  // bind_fields needs a mutable object; the output is the same
  return config::to_toml(config::bind_fields(copy, job_config_schema()), with_docs, origins);
}

std::string with_grad_accum_note(std::string toml, const job_config& config,
                                 std::string_view note) {
  if (config.train.global_batch_size <= 0) return toml;
  const auto key = fmt::format("\ngrad_accum_steps = {}", config.train.grad_accum_steps);
  if (const auto at = toml.find(key); at != std::string::npos)
    toml.insert(toml.find('\n', at + 1), fmt::format("  # {}", note));
  return toml;
}

std::string value_text(const job_config& config, std::string_view key,
                       const config::sources* origins) {
  job_config copy = config;
  return config::value_text(config::bind_fields(copy, job_config_schema()), key, origins,
                            job_other_names());
}

std::string job_config_reference() {
  job_config defaults;
  return config::to_markdown_reference(config::bind_fields(defaults, job_config_schema()));
}

}  // namespace muster

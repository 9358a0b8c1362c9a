// The job file: what a user writes to describe one training job (`muster run job.toml`).
// A plain struct with in-class defaults, its schema (one row per TOML key) and validate().
// etc/examples/job.toml shows every key with its default; a test keeps the two in step.
//
// Later issues add sections (parallel, model, train, ...): each adds its struct here, its rows
// to job_config_schema(), its checks to validate(), and its keys to the example.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_schema.hpp"

namespace muster {

struct job_section {
  std::string name = "muster-job";  // names the run directory; letters, digits, '.', '_', '-'
};

struct launch_section {
  int nproc = 0;                           // ranks per node; 0 = one per GPU, or 2 without GPUs
  std::string runs_dir = "./muster-runs";  // where run directories are created
  int kill_grace = 30;                     // seconds from SIGTERM to SIGKILL (Slurm's KillWait)
  std::string tee = "rank0";               // console shows: rank0, all or none of the ranks
  std::string gpu_binding = "node";        // node: every rank sees the node's GPUs; rank: its own
  int timeout_hang = 600;                  // seconds without a heartbeat before a rank is hung
  bool hang_dump = true;                   // SIGABRT a hung rank (core/stack dump), else SIGTERM
  int max_restarts = 0;                    // restarts of the ranks (all nodes) after a failure
  int timeout_rendezvous = 300;            // seconds for every node's launcher to arrive
  std::string master_addr;                 // MASTER_ADDR; "" = first host of Slurm's nodelist
  int master_port = 0;                     // MASTER_PORT; 0 = a free port node 0 picks
  bool requeue_on_signal = false;          // scontrol requeue after a forwarded SIGUSR1/2
};

struct log_section {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
};

// How the ranks are laid out (Megatron-Core semantics; launcher/plan/ resolves and checks it).
struct parallel_section {
  std::string allocation;                // AReaL string, e.g. "megatron:d4t2p2"; "" = sizes below
  int tensor = 1;                        // TP
  int pipeline = 1;                      // PP
  int virtual_pipeline = 1;              // model chunks per pipeline rank; 1 = not interleaved
  int first_stage_layers = 0;            // layers on pipeline stage 0; 0 = an even split
  int last_stage_layers = 0;             // layers on the last pipeline stage; 0 = an even split
  int context = 1;                       // CP
  int expert = 1;                        // EP, carved out of the expert-data-parallel ranks
  int expert_tensor = 0;                 // ETP; 0 = same as tensor (Megatron's default)
  int data = 0;                          // DP; 0 = world / (tensor * pipeline * context)
  bool sequence_parallel = false;        // shard norms/dropout activations over TP
  std::string order = "tp-cp-ep-dp-pp";  // Megatron's rank order, fastest-varying first
  std::string sharding = "optim_grads_params";  // no_shard, optim, optim_grads, optim_grads_params
  bool fsdp_prefetch = true;  // optim_grads_params: the next layer's all-gather started early
  // optim and up: a layer's gradient reduce-scatter runs while the layer below computes
  bool overlap_grad_reduce = true;
};

// The model's sizes (a Qwen3-MoE / Mixtral-style decoder); `config_json` fills them from a
// Hugging Face config.json, and keys set in the job file or on the command line win over it.
struct model_section {
  std::string config_json;  // Hugging Face config.json; "" = the sizes below
  int num_layers = 4;
  int hidden_size = 256;
  int ffn_hidden_size = 1024;  // dense SwiGLU MLP (dense layers)
  int num_attention_heads = 8;
  int num_query_groups = 4;     // key/value heads (GQA); = heads for MHA
  int head_dim = 0;             // 0 = hidden_size / num_attention_heads
  int vocab_size = 256;         // rows of the embedding (byte-level tokenizer: 256)
  bool qk_norm = true;          // RMSNorm on each head's query and key (Qwen3)
  bool attention_bias = false;  // bias on q/k/v projections (Qwen2)
  bool tie_embeddings = false;  // output head shares the embedding
  int q_lora_rank = 0;          // MLA (DeepSeek-V2/V3) when kv_lora_rank > 0
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int num_experts = 8;            // 0 = dense model
  int moe_ffn_hidden_size = 256;  // per routed expert
  int moe_router_topk = 2;
  int moe_shared_expert_ffn_hidden_size = 0;  // all shared experts together; 0 = none
  bool moe_shared_expert_gate = false;        // sigmoid gate on the shared expert (Qwen2-MoE)
  int moe_first_dense_layers = 0;    // leading dense layers (DeepSeek first_k_dense_replace)
  int moe_layer_freq = 1;            // every n-th layer after those is MoE
  double moe_capacity_factor = 0.0;  // 0 = dropless
  std::string moe_router_score = "softmax";  // softmax or sigmoid
  bool moe_router_topk_norm = true;  // the top-k weights of a token sum to 1 (norm_topk_prob)
  double moe_aux_loss_coeff = 1e-3;  // load-balancing loss weight (router_aux_loss_coef)
  double moe_z_loss_coeff = 0.0;     // router z-loss weight (ST-MoE)
  double rope_theta = 10000.0;       // rotary base (rope_theta)
  double norm_eps = 1e-6;            // RMSNorm epsilon (rms_norm_eps)
  bool operator==(const model_section&) const = default;
};

// The training step: batch sizes, precision, recompute.
struct train_section {
  int micro_batch_size = 1;                // sequences (or packs) per rank per forward
  int global_batch_size = 0;               // 0 = micro_batch_size * grad_accum_steps * DP
  int grad_accum_steps = 1;                // micro-batches per step per DP rank
  int seq_length = 256;                    // tokens per sequence
  int max_tokens_per_pack = 0;             // > 0: pack documents into rows of this many tokens
  std::string precision = "bf16";          // bf16 (fp32 main params, Adam moments) or fp32
  std::string device = "auto";             // auto (cuda where there is one), cuda or cpu
  std::string grad_reduce_dtype = "fp32";  // fp32 or bf16
  std::string recompute = "none";          // none, selective (attention core) or full (layer)
  std::string expert_gemm = "auto";        // experts' products on a GPU: auto, grouped,
                                           // per_expert, split or sm90
  int steps = 100;                         // optimizer steps of the run
  double lr = 3e-4;                        // peak learning rate (AdamW)
  double min_lr = 3e-5;                    // learning rate at the end of the cosine decay
  int warmup_steps = 10;                   // linear warmup from 0 to lr
  double weight_decay = 0.1;               // AdamW decoupled weight decay
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;      // clip the global gradient norm to this; 0 = off
  std::int64_t seed = 1234;    // initialisation and data order
  double peak_tflops = 0;      // one rank's device peak for MFU; 0 = measured at start
  bool deterministic = false;  // only deterministic kernels (a nondeterministic one fails)
  int profile_step_start = 0;  // > 0: profile steps start..end (numbered from 1, as logged)
  int profile_step_end = 0;    // the last step profiled; 0 = profile_step_start alone
};

// The training data.
struct data_section {
  std::vector<std::string> paths = {"/usr/share/common-licenses"};  // files, folders or prefixes
  std::string format = "text";  // text (byte-level tokens) or indexed (Megatron .bin/.idx)
};

// Checkpoints of the built-in engine: Hugging Face safetensors plus our sharded optimizer state.
struct checkpoint_section {
  std::string dir;   // "" = <run directory>/checkpoints
  int interval = 0;  // save every N steps; always after the last and on SIGUSR1/SIGTERM; -1 =
                     // only on those signals
  std::string load;  // "" = resume from dir's newest, if any; else a checkpoint or HF model dir
  int keep = 2;      // newest checkpoints kept in dir; 0 = all
  bool load_optim = true;  // false: resume the weights and step with a fresh optimizer
};

// Communication settings.
struct comm_section {
  bool nccl_ub = false;  // NCCL user buffers for the FSDP all-gather / reduce-scatter buffers
  int timeout = 600;     // seconds a collective may wait for the other ranks (NCCL/Gloo timeout)
};

// What muster-sbatch asks Slurm for (slurm/sbatch/): one task per node, the launcher spawns
// the ranks.
struct slurm_section {
  int nodes = 1;
  int gpus_per_node = 0;      // --gpus-per-node; 0 = ask for none (CPU jobs)
  int cpus_per_task = 0;      // --cpus-per-task of a node's one task (all its ranks); 0 = Slurm's
  std::string time;           // --time (slurm_time_seconds); "" = the partition's default
  std::string partition;      // "" = the cluster's default
  std::string account;        // "" = the user's default
  int checkpoint_lead = 300;  // --signal=B:USR1@N: USR1 N s before the limit; 0 = none
  bool requeue = false;       // --requeue, and launch.requeue_on_signal for the launchers
};

// Slurm's time limit `text` (--time) in seconds: minutes ("90"), MM:SS, HH:MM:SS, D-HH,
// D-HH:MM or D-HH:MM:SS, each field digits and none bounded, as Slurm reads them ("90:00" is 90
// minutes); "0", "-1", "UNLIMITED" and "INFINITE" (any case) are no limit: 0. std::nullopt for text
// that is none of these (sbatch would refuse it).
std::optional<std::int64_t> slurm_time_seconds(std::string_view text);

// A slurm.checkpoint_lead that a time limit of `limit_s` seconds allows, to propose: a quarter
// of it, as Slurm counts it (whole minutes, rounded up), at most the default 300 s and at least
// 1 s.
std::int64_t suggested_checkpoint_lead(std::int64_t limit_s);

struct job_config {
  job_section job;
  launch_section launch;
  log_section log;
  parallel_section parallel;
  model_section model;
  train_section train;
  data_section data;
  checkpoint_section checkpoint;
  comm_section comm;
  slurm_section slurm;
};

// One row per key of the job file, in the order the example file shows them.
std::span<const config::field<job_config>> job_config_schema();

// A loaded job config and where each of its values came from.
struct loaded_job_config {
  job_config config;
  config::sources where;
  // the path keys (data.paths, checkpoint.dir, checkpoint.load) whose relative values were made
  // absolute from the current directory
  std::vector<std::string> made_absolute;
};

// Defaults, then the TOML file (when `file` is not empty), then the overrides in order, then
// validate(). Relative data.paths, checkpoint.dir and checkpoint.load are made absolute from the
// current directory (where muster runs, the ranks' directory), so the run directory's copy of the
// job names the same files from anywhere; model.config_json is read from the job file's. Throws
// errc::config with the place of the offending value.
loaded_job_config load_job_config(const std::filesystem::path& file,
                                  std::span<const std::string> overrides);

// key=value overrides that set loaded.made_absolute's keys to their absolute values: what
// muster-sbatch passes on, so a job's relative paths are from where it was submitted.
std::vector<std::string> made_absolute_overrides(const loaded_job_config& loaded);

// Checks ranges and relations between values; messages name the place from `where`.
void validate(const job_config& config, const config::sources& where);

// The resolved config as TOML (what a run directory records); with `origins`, each key followed
// by where its value came from (config::to_toml).
std::string to_toml(const job_config& config, bool with_docs,
                    const config::sources* origins = nullptr);

// `toml` (to_toml's) with `note` as a comment after its grad_accum_steps line, where
// train.global_batch_size derives the steps (the value printed is then not the one used).
std::string with_grad_accum_note(std::string toml, const job_config& config, std::string_view note);

// One key's value, or a section's keys, as `muster config --get` prints them
// (config::value_text); an unknown name is errc::config with the nearest key, or the job key
// another tool's name stands for.
std::string value_text(const job_config& config, std::string_view key,
                       const config::sources* origins = nullptr);

// Every key with its type, default and doc, as Markdown tables (`muster config --reference`,
// docs/job-file.md).
std::string job_config_reference();

}  // namespace muster

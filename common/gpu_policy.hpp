// The GPU environment policy: which CUDA, NCCL and PyTorch allocator variables a job step gets,
// decided from its layout, the features it asks for and the node it runs on, each decision with
// a rule id and a one-line reason. musterd serves it to every job step on its node; when no
// daemon answers, the launcher applies the same library in-process, so the two never disagree.
//
// The rules, their conditions, actions and reasons: docs/policy-rules.md (one table; a test
// checks every rule id here appears there). The user's own variables win unless a rule forbids
// them; then the decision's reason says what the user had and why it was changed.
// Not here: applying it to a process (the launcher and the SPANK plugin do), probing the node.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster {

using env_vars = std::map<std::string, std::string, std::less<>>;

// What the node is, as musterd probes it (or a test describes it).
struct gpu_node_facts {
  int gpus = 0;                         // GPUs the step sees; 0: the GPU rules stay quiet
  int compute_major = 0;                // the lowest compute capability major of them; 0 unknown
  std::vector<std::string> interfaces;  // network interfaces up, not loopback ("eth0", "ib0")
  std::vector<std::string> ib_hcas;     // active InfiniBand/RoCE HCAs ("mlx5_0", ...)
};

// What the site decides (musterd.toml's [policy]).
struct gpu_site_policy {
  bool nvls_off = false;    // NVLink SHARP off on this site's nodes
  int trace_buffer = 2000;  // TORCH_NCCL_TRACE_BUFFER_SIZE: collectives kept for the dump
};

// What the policy decides from: the job step's facts.
struct gpu_policy_input {
  int tp = 1, cp = 1, ep = 1;
  std::string sharding = "no_shard";  // parallel.sharding
  bool nccl_ub = false;               // NCCL user buffers for the FSDP buffers
  bool fsdp_double_buffer = false;    // the FSDP all-gather / reduce-scatter double buffer
  bool tp_comm_overlap = false;       // TP communication overlapped with GEMMs
  bool ep_comm_overlap = false;       // expert all-to-all overlapped with compute
  bool expandable_segments = false;   // the allocator's expandable_segments:True asked for
  bool cuda_graphs = false;
  std::string torch_version;  // "2.5.1+cu124"; "" unknown
  bool memory_tight = false;  // the planner's estimate leaves little GPU memory free
  std::string dump_dir;       // where flight-recorder dumps go (the run directory)
  gpu_node_facts node;
  gpu_site_policy site;
  env_vars env;  // the environment the job step has
};

// One decision: set `variable` to `value`, or unset it when value is nullopt.
struct gpu_policy_decision {
  std::string rule;  // "cuda-max-connections-tp-cp"
  std::string variable;
  std::optional<std::string> value;
  std::string reason;  // one line for people
};

// A job setting the policy turned on (a warning for the user: their setting was overridden).
struct gpu_policy_setting {
  std::string rule;
  std::string setting;  // "fsdp_double_buffer"
  std::string value;
  std::string reason;
};

// A combination that cannot work: the message names the inputs and the fix.
struct gpu_policy_error {
  std::string rule;
  std::string message;
};

struct gpu_policy_result {
  std::vector<gpu_policy_decision> env;  // in rule order, at most one per variable
  std::vector<gpu_policy_setting> settings;
  std::vector<gpu_policy_error> errors;
};

// Every rule on `input`.
gpu_policy_result decide_gpu_policy(const gpu_policy_input& input);

// The environment decisions, after throwing errc::config with every error's message (the
// launcher's use: a refused combination stops the job before any worker starts).
std::vector<gpu_policy_decision> require_gpu_policy(const gpu_policy_result& result);

// Whether a rule reads `variable` from the job step's environment (a client sends only those).
bool gpu_policy_reads(std::string_view variable);

// Every rule id, in the order the rules run.
const std::vector<std::string>& gpu_policy_rules();

// "rule: set VAR=value: reason" (or "unset VAR"), as the run store records a decision.
std::string describe(const gpu_policy_decision& decision);

// Applies the decisions to an environment.
void apply_gpu_policy(const std::vector<gpu_policy_decision>& decisions, env_vars& env);

}  // namespace muster

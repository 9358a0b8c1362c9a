// The Slurm job step this process runs in, read from the environment Slurm gives it.
//
// read_slurm_step() is a pure function from an environment map to a checked slurm_step: every
// integer is parsed strictly, the node list is expanded, the compressed tasks-per-node form is
// expanded to one count per node, and the values are checked against each other. Inside an
// `srun` step the step's variables (SLURM_STEP_*) win over the job's. Everywhere else the job's
// are used: the batch script, salloc's shell (no SLURM_STEP_ID) and the steps that stand for the
// whole allocation, interactive and extern, whose SLURM_STEP_* variables describe one task on one
// node. process_env() is the one place that reads the real environment.
// Not here: deciding ranks or the job plan (launcher/), GPU discovery (NVML).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::launcher {

// Environment variables by name; std::less<> so lookups take a string_view.
using env_map = std::map<std::string, std::string, std::less<>>;

// Slurm's special step ids (slurm.h). SLURM_STEP_ID holding one of the first three is read like
// no SLURM_STEP_ID at all: the job's layout. Ids above kMaxNormalStepId that are not one of them
// are errors.
inline constexpr std::uint32_t kInteractiveStepId = 0xfffffffaU;  // SLURM_INTERACTIVE_STEP
inline constexpr std::uint32_t kBatchStepId = 0xfffffffbU;        // SLURM_BATCH_SCRIPT
inline constexpr std::uint32_t kExternStepId = 0xfffffffcU;       // SLURM_EXTERN_CONT
inline constexpr std::uint32_t kMaxNormalStepId = 0xfffffff0U;    // SLURM_MAX_NORMAL_STEP_ID

struct slurm_step {
  std::uint32_t job_id = 0;              // SLURM_JOB_ID
  std::optional<std::uint32_t> step_id;  // SLURM_STEP_ID of an srun step; unset elsewhere
  std::string nodelist;                  // compressed, as Slurm gave it (step's or job's)
  std::vector<std::string> nodes;        // nodelist expanded, in Slurm's order
  int num_nodes = 0;                     // == nodes.size()
  int num_tasks = 0;                     // == sum of tasks_per_node
  std::vector<int> tasks_per_node;       // one count per entry of nodes
  std::optional<int> ntasks_per_node;    // SLURM_NTASKS_PER_NODE, only when requested
  int proc_id = 0;                       // SLURM_PROCID: global task rank, < num_tasks
  int local_id = 0;                      // SLURM_LOCALID: rank on this node
  // Index of this process's node in nodes: SLURM_NODEID in an srun step; elsewhere where
  // SLURMD_NODENAME is in nodes (the batch script also checks SLURM_NODEID against it). Unset
  // when this process is not on a node of the allocation or cannot tell: salloc's shell on the
  // submit host has neither variable.
  std::optional<int> node_id;
  std::optional<std::string> node_name;  // SLURMD_NODENAME, as set (== this_node() in a step)
  std::vector<int> job_gpus;             // SLURM_JOB_GPUS: GPU indices of the job here
  std::vector<int> step_gpus;            // SLURM_STEP_GPUS: GPU indices of the step here
  // CUDA_VISIBLE_DEVICES as CUDA reads it (see read_slurm_step); unset: all devices.
  std::optional<std::vector<std::string>> visible_devices;
  std::optional<int> gpus_on_node;             // SLURM_GPUS_ON_NODE
  std::optional<int> cpus_on_node;             // SLURM_CPUS_ON_NODE
  std::string submit_dir;                      // SLURM_SUBMIT_DIR, "" when unset
  int restart_count = 0;                       // SLURM_RESTART_COUNT; unset until a requeue: 0
  std::optional<std::uint32_t> array_job_id;   // SLURM_ARRAY_JOB_ID, with array_task_id
  std::optional<std::uint32_t> array_task_id;  // SLURM_ARRAY_TASK_ID
  std::optional<std::string> cluster_name;     // SLURM_CLUSTER_NAME (ClusterName in slurm.conf)

  // True inside an srun step; false in the batch script, salloc's shell and the interactive
  // and extern steps.
  bool in_step() const { return step_id.has_value(); }
  // The name of the node this process runs on (nodes[*node_id]); unset with node_id.
  std::optional<std::string> this_node() const {
    if (!node_id) return std::nullopt;
    return nodes[static_cast<std::size_t>(*node_id)];
  }
};

// True when the environment comes from a Slurm job (SLURM_JOB_ID is set).
bool inside_slurm(const env_map& env);

// Reads and checks the step from env. Inside an srun step (SLURM_STEP_ID set, not a special id)
// it prefers SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES, SLURM_STEP_NUM_TASKS and
// SLURM_STEP_TASKS_PER_NODE, falling back to SLURM_JOB_NODELIST (then SLURM_NODELIST),
// SLURM_NNODES, SLURM_NTASKS and SLURM_TASKS_PER_NODE; elsewhere it reads only the job's.
// Required: SLURM_JOB_ID, a node list and a tasks-per-node value; SLURM_PROCID, SLURM_LOCALID
// and SLURM_NODEID inside an srun step (proc_id and local_id are 0 elsewhere when unset; node_id
// as documented at the member). SLURM_NTASKS and the node count are optional but checked when
// set. CUDA_VISIBLE_DEVICES follows CUDA's rule: entries are read up to the first that is not a
// GPU index or a GPU-/MIG- UUID (a negative index such as -1 ends it too), or that repeats an
// earlier one; the rest is ignored; so "-1", "" and Slurm's "NoDevFiles" mean no GPU.
// Throws muster::error(errc::environment) naming the variable, its value and what was
// expected, e.g. "SLURM_NNODES=3 but SLURM_JOB_NODELIST=gpu[01-04] names 4 nodes".
slurm_step read_slurm_step(const env_map& env);

// Expands Slurm's compressed tasks-per-node form ("2(x3),1" -> 2,2,2,1); `variable` names the
// source in errors. Counts are >= 1, repetitions >= 1, at most kMaxHostlistHosts entries.
// Throws muster::error(errc::environment) quoting the value and the faulty entry's column.
std::vector<int> expand_tasks_per_node(std::string_view variable, std::string_view value);

// Parses a GPU index list ("0,1,3", ranges "0-3" accepted; "" is none); `variable` names the
// source in errors. Indices are unique and >= 0. Throws muster::error(errc::environment).
std::vector<int> parse_gpu_indices(std::string_view variable, std::string_view value);

// CUDA_VISIBLE_DEVICES as CUDA reads it: entries up to the first that is neither an index nor
// a GPU-/MIG- UUID (prefix), "-1" and other negative indices included, or that repeats an
// earlier one. "NoDevFiles" (Slurm's value for a GRES without device files) and "" are none.
std::vector<std::string> parse_visible_devices(std::string_view value);

// The environment of this process (environ) as an env_map.
env_map process_env();

}  // namespace muster::launcher

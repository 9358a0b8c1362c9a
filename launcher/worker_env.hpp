// The environment a worker starts with: the launcher's own environment plus the torchrun
// contract, so code written for torchrun runs unchanged, plus muster's own variables.
//
//   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node's index),
//   GROUP_WORLD_SIZE, ROLE_NAME ("default"), ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,
//   MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
//   TORCHELASTIC_ERROR_FILE (per rank; read back when the rank fails), OMP_NUM_THREADS (only
//   when unset: the node's CPUs over its ranks, at least 1, as torchrun sets it to 1)
//   MUSTER_RUN_DIR, MUSTER_RUN_ID, MUSTER_RANK, MUSTER_LOCAL_RANK, MUSTER_WORLD_SIZE,
//   MUSTER_HEARTBEAT_FILE (touch it, or write a progress line: heartbeat.hpp),
//   MUSTER_STEPS_FILE (append a line per step: common/step_line.hpp),
//   CUDA_VISIBLE_DEVICES (the rank's GPU, when GPUs are known), PYTHONFAULTHANDLER=1 (only when
//   unset, under launch.hang_dump: a hung Python rank's SIGABRT dumps its stacks)
//   Under a Slurm task of the node (SLURM_PROCID set, shares_slurm_task), Slurm's task
//   variables as one task a rank would have
//   them: SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS (SLURM_NPROCS, SLURM_STEP_NUM_TASKS),
//   SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE and SLURM_STEP_TASKS_PER_NODE ("4(x2)")
//
// A pure function of its inputs: no I/O, no getenv. Not here: choosing the GPU
// (device_assignment.hpp), the GPU
// policy (common/gpu_policy.hpp), starting processes (worker_process.hpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "launcher/slurm_step.hpp"

namespace muster::launcher {

// Where one rank sits, and what its run is.
struct worker_identity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;                    // GROUP_RANK
  int num_nodes = 1;                    // GROUP_WORLD_SIZE
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string run_id;
  std::filesystem::path run_dir;
  std::filesystem::path error_file;     // TORCHELASTIC_ERROR_FILE
  std::filesystem::path heartbeat_file; // MUSTER_HEARTBEAT_FILE
  std::filesystem::path steps_file;     // MUSTER_STEPS_FILE
  int restart_count = 0;
  int max_restarts = 0;
  int cpus_on_node = 1;                 // for OMP_NUM_THREADS when the user did not set it
  // PYTHONFAULTHANDLER=1 unless set: a Python rank dumps every thread's stack on the SIGABRT
  // of launch.hang_dump (and on a crash), where the hang would otherwise leave nothing
  bool python_stacks = false;
  std::optional<std::string> gpu;       // CUDA_VISIBLE_DEVICES; unset: left as it is
  // the ranks run under one launcher task a node (muster launch), not one Slurm task each:
  // Slurm's task variables are the node's task's, and are rewritten as the rank's own
  bool shares_slurm_task = false;
};

// `base` with the contract's variables set (replacing any of the same name in `base`).
env_map worker_env(const env_map& base, const worker_identity& who);

}  // namespace muster::launcher

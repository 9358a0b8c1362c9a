// The worker's environment: see worker_env.hpp.
#include "launcher/worker_env.hpp"

#include <algorithm>

namespace muster::launcher {

env_map worker_env(const env_map& base, const worker_identity& who) {
  env_map env = base;
  auto set = [&env](const char* name, const auto& value) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>)
      env[name] = std::to_string(value);
    else
      env[name] = std::string(value);
  };
  set("RANK", who.rank);
  set("LOCAL_RANK", who.local_rank);
  set("WORLD_SIZE", who.world_size);
  set("LOCAL_WORLD_SIZE", who.local_world_size);
  set("GROUP_RANK", who.node_rank);
  set("GROUP_WORLD_SIZE", who.num_nodes);
  set("ROLE_NAME", "default");
  set("ROLE_RANK", who.rank);
  set("ROLE_WORLD_SIZE", who.world_size);
  set("MASTER_ADDR", who.master_addr);
  set("MASTER_PORT", who.master_port);
  set("TORCHELASTIC_RUN_ID", who.run_id);
  set("TORCHELASTIC_RESTART_COUNT", who.restart_count);
  set("TORCHELASTIC_MAX_RESTARTS", who.max_restarts);
  set("TORCHELASTIC_ERROR_FILE", who.error_file.string());
  set("MUSTER_RUN_DIR", who.run_dir.string());
  set("MUSTER_RUN_ID", who.run_id);
  set("MUSTER_RANK", who.rank);
  set("MUSTER_LOCAL_RANK", who.local_rank);
  set("MUSTER_WORLD_SIZE", who.world_size);
  set("MUSTER_HEARTBEAT_FILE", who.heartbeat_file.string());
  if (!who.steps_file.empty()) set("MUSTER_STEPS_FILE", who.steps_file.string());
  if (who.gpu) set("CUDA_VISIBLE_DEVICES", *who.gpu);
  if (who.python_stacks && env.find("PYTHONFAULTHANDLER") == env.end())
    set("PYTHONFAULTHANDLER", 1);
  // under a Slurm task (one a node, all its ranks): Slurm's task variables as a step of one task
  // a rank would give them, for code that reads them before torchrun's (Lightning's
  // SLURMEnvironment, submitit); SLURM_NODEID is the node's already
  if (who.shares_slurm_task && env.find("SLURM_PROCID") != env.end()) {
    const auto per_node = who.num_nodes > 1 ? std::to_string(who.local_world_size) + "(x" +
                                                  std::to_string(who.num_nodes) + ")"
                                            : std::to_string(who.local_world_size);
    set("SLURM_PROCID", who.rank);
    set("SLURM_LOCALID", who.local_rank);
    for (const char* name : {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS"})
      set(name, who.world_size);
    set("SLURM_NTASKS_PER_NODE", who.local_world_size);
    set("SLURM_TASKS_PER_NODE", per_node);
    set("SLURM_STEP_TASKS_PER_NODE", per_node);
  }
  if (env.find("OMP_NUM_THREADS") == env.end())
    set("OMP_NUM_THREADS", std::max(1, who.cpus_on_node / std::max(1, who.local_world_size)));
  return env;
}

}  // namespace muster::launcher

// One node's part of a run, shared by `muster run` (one node, no group) and `muster launch`
// (every node of a Slurm step, in a node_group): sets up the workers' environment (torchrun's
// contract, GPUs, CPUs, the GPU policy), records the run in this node's store file, supervises
// the ranks, and restarts them together with the other nodes after a failure
// (launch.max_restarts). With a group, a rank failing on any node stops every node's ranks
// within a second, and every launcher exits with the code of the job's first failure.
// Not here: planning the layout, the run directory's name, finding the other nodes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/gpu_policy.hpp"
#include "common/job_config.hpp"
#include "common/run_dir.hpp"
#include "launcher/rendezvous/node_group.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::launcher {

struct node_run_plan {
  const job_config* config = nullptr;
  std::vector<gpu_policy_decision> policy;  // decide_gpu_policy's, applied to every worker
  int local_ranks = 1;
  int first_rank = 0;               // the global rank of local rank 0
  int world_size = 1;
  int node_rank = 0;                // GROUP_RANK
  int num_nodes = 1;
  std::string host;                 // names this node's store file and its records
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::optional<std::string> slurm_job_id;
  std::optional<std::string> slurm_cluster;  // SLURM_CLUSTER_NAME, recorded with the run
  std::optional<std::string> slurm_task_job_id;  // an array task's own SLURM_JOB_ID
  std::vector<std::string> argv;    // resolved (find_executable) by the caller
  env_map base_env;                 // the launcher's environment
  int num_gpus = 0;                 // GPUs this node has (local_gpus.hpp)
  int restart_base = 0;             // starts before this one (SLURM_RESTART_COUNT)
  int console_fd = 1;
  std::string rendezvous;           // how this node met the others, recorded; "" = alone
  // Inside a Slurm step: slurmstepd signals every process of the step, workers included.
  bool slurm_signals_workers = false;
};

// With a group: how to watch a round's first failure on a connection of its own.
struct node_run_group {
  rendezvous::node_group* group = nullptr;
  std::function<std::unique_ptr<rendezvous::failure_watch>(int round)> watch;
};

struct node_run_result {
  int exit_code = 0;                       // the job's first failure's code, else 0
  // a node forwarded SIGUSR1/2 (requeue_on_signal): the signal and the host of the node that
  // forwarded it first, "SIGUSR1, seen first on gpu-a02"
  std::optional<std::string> requeue_asked;
};

// Runs this node's ranks to the end. The run directory exists; this node's store file is
// created in it. Throws errc::io / errc::store when the store cannot be written.
node_run_result run_node(const node_run_plan& plan, const store::run_paths& paths,
                         const node_run_group& group = {});

}  // namespace muster::launcher

// Tests of the worker's environment (launcher/worker_env.hpp): torchrun's contract.
#include <catch2/catch.hpp>

#include "launcher/worker_env.hpp"

using muster::launcher::env_map;
using muster::launcher::worker_env;
using muster::launcher::worker_identity;

namespace {

// Rank 5 of 8: local rank 1 of 4 on node 1 of 2.
worker_identity rank_5_of_8() {
  worker_identity who;
  who.rank = 5;
  who.local_rank = 1;
  who.world_size = 8;
  who.local_world_size = 4;
  who.node_rank = 1;
  who.num_nodes = 2;
  return who;
}

}  // namespace

TEST_CASE("workers get torchrun's variables and muster's, over the launcher's", "[worker_env]") {
  env_map base = {{"PATH", "/usr/bin"}, {"RANK", "99"}, {"HOME", "/root"}};
  auto who = rank_5_of_8();
  who.master_addr = "gpu-a01";
  who.master_port = 41234;
  who.run_id = "moe-20261122-010203-abcd";
  who.run_dir = "/runs/moe-20261122-010203-abcd";
  who.error_file = "/runs/moe/logs/rank-5.error.json";
  who.heartbeat_file = "/runs/moe/logs/rank-5.heartbeat";
  who.restart_count = 2;
  who.max_restarts = 3;
  who.cpus_on_node = 32;
  auto env = worker_env(base, who);
  const env_map expected_subset = {
      {"RANK", "5"},           {"LOCAL_RANK", "1"},          {"WORLD_SIZE", "8"},
      {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},        {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_NAME", "default"}, {"ROLE_RANK", "5"},          {"ROLE_WORLD_SIZE", "8"},
      {"MASTER_ADDR", "gpu-a01"}, {"MASTER_PORT", "41234"},
      {"TORCHELASTIC_RUN_ID", "moe-20261122-010203-abcd"},
      {"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_ERROR_FILE", "/runs/moe/logs/rank-5.error.json"},
      {"MUSTER_RUN_DIR", "/runs/moe-20261122-010203-abcd"}, {"MUSTER_RANK", "5"},
      {"MUSTER_HEARTBEAT_FILE", "/runs/moe/logs/rank-5.heartbeat"},
      {"OMP_NUM_THREADS", "8"},  // 32 CPUs over 4 local ranks
      {"PATH", "/usr/bin"},      {"HOME", "/root"}};
  for (const auto& [name, value] : expected_subset) {
    INFO(name);
    CHECK(env.at(name) == value);
  }
}

TEST_CASE("a user's OMP_NUM_THREADS is kept, and there is always at least one", "[worker_env]") {
  worker_identity who;
  who.local_world_size = 4;
  who.cpus_on_node = 2;
  CHECK(worker_env({}, who).at("OMP_NUM_THREADS") == "1");
  CHECK(worker_env({{"OMP_NUM_THREADS", "6"}}, who).at("OMP_NUM_THREADS") == "6");
}

TEST_CASE("under the hang dump a Python rank dumps its stacks, unless the user said otherwise",
          "[worker_env]") {
  worker_identity who;
  CHECK_FALSE(worker_env({}, who).contains("PYTHONFAULTHANDLER"));
  who.python_stacks = true;
  CHECK(worker_env({}, who).at("PYTHONFAULTHANDLER") == "1");
  CHECK(worker_env({{"PYTHONFAULTHANDLER", ""}}, who).at("PYTHONFAULTHANDLER").empty());
}

TEST_CASE("a rank's GPU becomes its CUDA_VISIBLE_DEVICES, without one it is left alone",
          "[worker_env]") {
  worker_identity who;
  who.gpu = "5";
  CHECK(worker_env({{"CUDA_VISIBLE_DEVICES", "4,5"}}, who).at("CUDA_VISIBLE_DEVICES") == "5");
  who.gpu.reset();
  CHECK(worker_env({{"CUDA_VISIBLE_DEVICES", "4,5"}}, who).at("CUDA_VISIBLE_DEVICES") == "4,5");
  CHECK(worker_env({}, who).count("CUDA_VISIBLE_DEVICES") == 0);
}

TEST_CASE("under a Slurm task of a node, a rank gets Slurm's task variables as its own task's",
          "[worker_env]") {
  // the launcher's task: task 1 of a step of one task on each of 2 nodes
  env_map base = {{"SLURM_PROCID", "1"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_TASKS_PER_NODE", "1(x2)"},
                  {"SLURM_JOB_ID", "4242"}};
  auto who = rank_5_of_8();
  // a rank that is its own Slurm task has Slurm's own (its tasks per node may be uneven)
  CHECK(worker_env(base, who).at("SLURM_TASKS_PER_NODE") == "1(x2)");
  who.shares_slurm_task = true;
  auto env = worker_env(base, who);
  const env_map expected = {{"SLURM_PROCID", "5"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "1"},
                            {"SLURM_NTASKS", "8"},
                            {"SLURM_NPROCS", "8"},
                            {"SLURM_STEP_NUM_TASKS", "8"},
                            {"SLURM_NTASKS_PER_NODE", "4"},
                            {"SLURM_TASKS_PER_NODE", "4(x2)"},
                            {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                            {"SLURM_JOB_ID", "4242"}};
  for (const auto& [name, value] : expected) {
    INFO(name);
    CHECK(env.at(name) == value);
  }
  // outside Slurm none is made up
  CHECK_FALSE(worker_env({}, who).contains("SLURM_PROCID"));
}

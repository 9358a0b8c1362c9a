// Unit tests of launcher/slurm_step: environments as Slurm 22.05/23.x sets them for a batch
// script, srun steps (even and uneven tasks per node), array jobs and GPU jobs, and the errors
// for missing or inconsistent variables.
// The interactive and extern steps and salloc's shell are read as the whole job.
// These environments are written in the forms Slurm documents (including variables muster
// ignores, so their presence is tested too), for cases the loopback cluster cannot produce
// (8 GPUs a node, GPU UUIDs, requeues); test_slurm_step_captured.cpp reads real ones.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "common/error.hpp"
#include "launcher/slurm_step.hpp"
#include "tests/support/expect_error.hpp"

using muster::launcher::env_map;
using muster::launcher::read_slurm_step;

namespace {

// `sbatch -N4 --ntasks-per-node=8 --gpus-per-node=8 -p gpu train.sbatch`, the batch script's
// environment on gpu01 (Slurm 23.02).
env_map batch_env() {
  return {
      {"SLURM_JOB_ID", "4817234"},
      {"SLURM_JOBID", "4817234"},
      {"SLURM_JOB_NAME", "moe-train"},
      {"SLURM_JOB_NODELIST", "gpu[01-04]"},
      {"SLURM_NODELIST", "gpu[01-04]"},
      {"SLURM_JOB_NUM_NODES", "4"},
      {"SLURM_NNODES", "4"},
      {"SLURM_NTASKS", "32"},
      {"SLURM_NPROCS", "32"},
      {"SLURM_NTASKS_PER_NODE", "8"},
      {"SLURM_TASKS_PER_NODE", "8(x4)"},
      {"SLURM_JOB_CPUS_PER_NODE", "96(x4)"},
      {"SLURM_CPUS_ON_NODE", "96"},
      {"SLURM_NODEID", "0"},
      {"SLURM_PROCID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_TASK_PID", "912334"},
      {"SLURMD_NODENAME", "gpu01"},
      {"SLURM_SUBMIT_DIR", "/home/alice/moe"},
      {"SLURM_SUBMIT_HOST", "login01"},
      {"SLURM_JOB_PARTITION", "gpu"},
      {"SLURM_JOB_ACCOUNT", "ml"},
      {"SLURM_JOB_QOS", "normal"},
      {"SLURM_GPUS_ON_NODE", "8"},
      {"SLURM_GPUS_PER_NODE", "8"},
      {"SLURM_JOB_GPUS", "0,1,2,3,4,5,6,7"},
      {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
      {"GPU_DEVICE_ORDINAL", "0,1,2,3,4,5,6,7"},
      {"SLURM_CLUSTER_NAME", "hpc"},
      {"SLURM_GTIDS", "0"},
      {"SLURM_PRIO_PROCESS", "0"},
      {"SLURM_TOPOLOGY_ADDR", "gpu01"},
      {"SLURM_TOPOLOGY_ADDR_PATTERN", "node"},
      {"SLURM_MEM_PER_NODE", "491520"},
      {"SLURM_CONF", "/etc/slurm/slurm.conf"},
      {"ENVIRONMENT", "BATCH"},
      {"HOME", "/home/alice"},
      {"PATH", "/usr/bin:/bin"},
  };
}

// Inside that job: `srun -N2 --ntasks-per-node=4 python train.py`, task 5 (gpu02, local 1).
// srun overwrites SLURM_NODELIST, SLURM_NNODES, SLURM_NTASKS and SLURM_TASKS_PER_NODE with the
// step's values and adds the SLURM_STEP_* ones; SLURM_JOB_NODELIST stays the job's.
env_map step_env() {
  env_map env = batch_env();
  env.erase("ENVIRONMENT");
  env.insert_or_assign("SLURM_STEP_ID", "0");
  env.insert_or_assign("SLURM_STEPID", "0");
  env.insert_or_assign("SLURM_NODELIST", "gpu[01-02]");
  env.insert_or_assign("SLURM_STEP_NODELIST", "gpu[01-02]");
  env.insert_or_assign("SLURM_NNODES", "2");
  env.insert_or_assign("SLURM_STEP_NUM_NODES", "2");
  env.insert_or_assign("SLURM_NTASKS", "8");
  env.insert_or_assign("SLURM_NPROCS", "8");
  env.insert_or_assign("SLURM_STEP_NUM_TASKS", "8");
  env.insert_or_assign("SLURM_NTASKS_PER_NODE", "4");
  env.insert_or_assign("SLURM_TASKS_PER_NODE", "4(x2)");
  env.insert_or_assign("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
  env.insert_or_assign("SLURM_NODEID", "1");
  env.insert_or_assign("SLURM_PROCID", "5");
  env.insert_or_assign("SLURM_LOCALID", "1");
  env.insert_or_assign("SLURM_GTIDS", "4,5,6,7");
  env.insert_or_assign("SLURMD_NODENAME", "gpu02");
  env.insert_or_assign("SLURM_TOPOLOGY_ADDR", "gpu02");
  env.insert_or_assign("SLURM_STEP_GPUS", "0,1,2,3,4,5,6,7");
  env.insert_or_assign("SLURM_STEP_LAUNCHER_PORT", "42817");
  env.insert_or_assign("SLURM_SRUN_COMM_HOST", "10.0.0.1");
  env.insert_or_assign("SLURM_SRUN_COMM_PORT", "40123");
  env.insert_or_assign("SLURM_DISTRIBUTION", "block");
  env.insert_or_assign("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.1");
  env.insert_or_assign("SLURM_UMASK", "0022");
  return env;
}

// The environment error read_slurm_step throws for env (fails the test if none).
std::string step_error(const env_map& env) {
  return muster::test::expect_error(muster::errc::environment, [&] { read_slurm_step(env); });
}

}  // namespace

TEST_CASE("slurm step reads a batch script's environment as the job's", "[slurm_step]") {
  env_map env = batch_env();
  REQUIRE(muster::launcher::inside_slurm(env));
  auto step = read_slurm_step(env);
  CHECK(step.job_id == 4817234);
  CHECK_FALSE(step.in_step());
  CHECK(step.nodelist == "gpu[01-04]");
  CHECK(step.nodes == std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu04"});
  CHECK(step.num_nodes == 4);
  CHECK(step.num_tasks == 32);
  CHECK(step.tasks_per_node == std::vector<int>{8, 8, 8, 8});
  CHECK(step.ntasks_per_node == 8);
  CHECK((step.proc_id == 0 && step.local_id == 0 && step.node_id == 0));
  CHECK(step.this_node() == "gpu01");
  CHECK(step.node_name == "gpu01");
  CHECK(step.job_gpus == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(step.step_gpus.empty());
  REQUIRE(step.visible_devices);
  CHECK(step.visible_devices->size() == 8);
  CHECK(step.gpus_on_node == 8);
  CHECK(step.cpus_on_node == 96);
  CHECK(step.submit_dir == "/home/alice/moe");
  CHECK(step.restart_count == 0);
  CHECK_FALSE(step.array_job_id);
  CHECK_FALSE(step.array_task_id);
  CHECK(step.cluster_name == "hpc");
}

TEST_CASE("slurm step prefers the step's variables inside srun", "[slurm_step]") {
  auto step = read_slurm_step(step_env());
  CHECK(step.in_step());
  CHECK(step.step_id == 0u);
  CHECK(step.nodelist == "gpu[01-02]");  // not the job's gpu[01-04]
  CHECK(step.nodes == std::vector<std::string>{"gpu01", "gpu02"});
  CHECK(step.num_nodes == 2);
  CHECK(step.num_tasks == 8);
  CHECK(step.tasks_per_node == std::vector<int>{4, 4});
  CHECK(step.proc_id == 5);
  CHECK(step.local_id == 1);
  CHECK(step.node_id == 1);
  CHECK(step.this_node() == "gpu02");
  CHECK(step.step_gpus.size() == 8);
}

TEST_CASE("slurm step falls back to the job's variables when a step variable is missing",
          "[slurm_step]") {
  env_map env = step_env();
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_STEP_NUM_NODES");
  env.erase("SLURM_NNODES");
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  env.erase("SLURM_TASKS_PER_NODE");
  CHECK_THAT(step_error(env), Catch::Contains("SLURM_STEP_TASKS_PER_NODE is not set"));
  env.insert_or_assign("SLURM_TASKS_PER_NODE", "2(x4)");
  auto step = read_slurm_step(env);  // the job's four nodes, two tasks each
  CHECK(step.nodes.size() == 4);
  CHECK(step.tasks_per_node == std::vector<int>{2, 2, 2, 2});
}

TEST_CASE("slurm step expands uneven tasks per node of srun -N3 -n7", "[slurm_step]") {
  env_map env = step_env();
  env.insert_or_assign("SLURM_STEP_ID", "3");
  env.insert_or_assign("SLURM_STEP_NODELIST", "gpu[01-03]");
  env.insert_or_assign("SLURM_NODELIST", "gpu[01-03]");
  env.insert_or_assign("SLURM_STEP_NUM_NODES", "3");
  env.insert_or_assign("SLURM_NNODES", "3");
  env.insert_or_assign("SLURM_STEP_NUM_TASKS", "7");
  env.insert_or_assign("SLURM_NTASKS", "7");
  env.insert_or_assign("SLURM_NPROCS", "7");
  env.erase("SLURM_NTASKS_PER_NODE");
  env.insert_or_assign("SLURM_STEP_TASKS_PER_NODE", "3,2(x2)");
  env.insert_or_assign("SLURM_TASKS_PER_NODE", "3,2(x2)");
  env.insert_or_assign("SLURM_NODEID", "2");
  env.insert_or_assign("SLURM_PROCID", "6");
  env.insert_or_assign("SLURM_LOCALID", "1");
  env.insert_or_assign("SLURMD_NODENAME", "gpu03");
  auto step = read_slurm_step(env);
  CHECK(step.step_id == 3u);
  CHECK(step.tasks_per_node == std::vector<int>{3, 2, 2});
  CHECK(step.num_tasks == 7);
  CHECK_FALSE(step.ntasks_per_node);
  CHECK(step.this_node() == "gpu03");
}

TEST_CASE("slurm step reads an array task on one CPU node", "[slurm_step]") {
  // `sbatch --array=0-9 job.sh`, task 7: a batch script without -n (no SLURM_NTASKS).
  env_map env = {
      {"SLURM_JOB_ID", "5008"},
      {"SLURM_JOBID", "5008"},
      {"SLURM_ARRAY_JOB_ID", "5000"},
      {"SLURM_ARRAY_TASK_ID", "7"},
      {"SLURM_ARRAY_TASK_COUNT", "10"},
      {"SLURM_ARRAY_TASK_MIN", "0"},
      {"SLURM_ARRAY_TASK_MAX", "9"},
      {"SLURM_ARRAY_TASK_STEP", "1"},
      {"SLURM_JOB_NODELIST", "cn0412"},
      {"SLURM_NODELIST", "cn0412"},
      {"SLURM_JOB_NUM_NODES", "1"},
      {"SLURM_NNODES", "1"},
      {"SLURM_TASKS_PER_NODE", "1"},
      {"SLURM_JOB_CPUS_PER_NODE", "1"},
      {"SLURM_CPUS_ON_NODE", "1"},
      {"SLURM_NODEID", "0"},
      {"SLURM_PROCID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURMD_NODENAME", "cn0412"},
      {"SLURM_SUBMIT_DIR", "/scratch/bob/sweep"},
      {"SLURM_RESTART_COUNT", "2"},
  };
  auto step = read_slurm_step(env);
  CHECK(step.job_id == 5008);
  CHECK(step.array_job_id == 5000u);
  CHECK(step.array_task_id == 7u);
  CHECK(step.num_tasks == 1);
  CHECK(step.nodes == std::vector<std::string>{"cn0412"});
  CHECK(step.restart_count == 2);
  CHECK_FALSE(step.visible_devices);  // unset: every device is visible
  CHECK(step.job_gpus.empty());
}

TEST_CASE("slurm step keeps GPU and MIG UUIDs of CUDA_VISIBLE_DEVICES as strings", "[slurm_step]") {
  env_map env = step_env();
  env.insert_or_assign("SLURM_STEP_GPUS", "2,3");
  env.insert_or_assign("SLURM_GPUS_ON_NODE", "2");
  env.insert_or_assign("CUDA_VISIBLE_DEVICES",
                       "GPU-3b3c3d3e-1f2a-4b5c-8d9e-0a1b2c3d4e5f,"
                       "MIG-7d0e9c2b-5a41-5c3e-9f1a-2b3c4d5e6f70");
  auto step = read_slurm_step(env);
  CHECK(step.step_gpus == std::vector<int>{2, 3});
  CHECK(step.gpus_on_node == 2);
  REQUIRE(step.visible_devices);
  CHECK(*step.visible_devices ==
        std::vector<std::string>{"GPU-3b3c3d3e-1f2a-4b5c-8d9e-0a1b2c3d4e5f",
                                 "MIG-7d0e9c2b-5a41-5c3e-9f1a-2b3c4d5e6f70"});
  env.insert_or_assign("CUDA_VISIBLE_DEVICES", "NoDevFiles");  // Slurm: GRES without devices
  CHECK(read_slurm_step(env).visible_devices->empty());
  env.insert_or_assign("CUDA_VISIBLE_DEVICES", "");
  CHECK(read_slurm_step(env).visible_devices->empty());
}

TEST_CASE("slurm step reads CUDA_VISIBLE_DEVICES up to its first invalid entry, as CUDA does",
          "[slurm_step]") {
  struct row {
    std::string value;
    std::vector<std::string> devices;
  };
  const std::vector<row> table = {
      {"-1", {}},  // the common way to hide every GPU from a CPU-only job
      {"0,1,-1,3", {"0", "1"}},
      {"-1,0", {}},
      {"2,0", {"2", "0"}},  // order kept
      {"0,gpu1,2", {"0"}},
      {"gpu1", {}},
      {"0,,1", {"0"}},
      {"1,", {"1"}},
      {"1,1,2", {"1"}},  // a repeated device ends the list
      {"GPU-3b3c,-1,GPU-4d4e", {"GPU-3b3c"}},
      {"NoDevFiles", {}},
      {"", {}},
  };
  for (const row& r : table) {
    INFO("CUDA_VISIBLE_DEVICES=" << r.value);
    env_map env = batch_env();
    env.insert_or_assign("CUDA_VISIBLE_DEVICES", r.value);
    auto step = read_slurm_step(env);
    REQUIRE(step.visible_devices);
    CHECK(*step.visible_devices == r.devices);
  }
}

namespace {

// Inside the job of batch_env(), a step that stands for the whole allocation: Slurm gives it
// one task on one node (here gpu03, whose SLURM_NODEID counts within the step: 0).
env_map one_task_step_env(const char* step_id) {
  env_map env = batch_env();
  env.erase("ENVIRONMENT");
  env.insert_or_assign("SLURM_STEP_ID", step_id);
  env.insert_or_assign("SLURM_STEPID", step_id);
  env.insert_or_assign("SLURM_STEP_NODELIST", "gpu03");
  env.insert_or_assign("SLURM_STEP_NUM_NODES", "1");
  env.insert_or_assign("SLURM_STEP_NUM_TASKS", "1");
  env.insert_or_assign("SLURM_STEP_TASKS_PER_NODE", "1");
  env.insert_or_assign("SLURM_NODEID", "0");
  env.insert_or_assign("SLURMD_NODENAME", "gpu03");
  return env;
}

}  // namespace

TEST_CASE("slurm step reads the batch, interactive and extern steps as the whole job",
          "[slurm_step]") {
  for (const char* id : {"4294967291", "4294967290", "4294967292"}) {  // batch, interactive, extern
    INFO("SLURM_STEP_ID=" << id);
    env_map env = one_task_step_env(id);
    if (std::string(id) == "4294967291") {  // the batch script runs on the job's first node
      env.insert_or_assign("SLURMD_NODENAME", "gpu01");
      env.erase("SLURM_STEP_NODELIST");
    }
    auto step = read_slurm_step(env);
    CHECK_FALSE(step.in_step());
    CHECK_FALSE(step.step_id);
    CHECK(step.nodelist == "gpu[01-04]");  // the job's, not the step's one node
    CHECK(step.tasks_per_node == std::vector<int>{8, 8, 8, 8});
    CHECK(step.num_tasks == 32);
    if (std::string(id) == "4294967291") {
      CHECK(step.this_node() == "gpu01");
    } else {  // found by SLURMD_NODENAME; the step's SLURM_NODEID=0 is not the job's index
      CHECK(step.node_id == 2);
      CHECK(step.this_node() == "gpu03");
    }
  }
}

TEST_CASE("slurm step rejects special step ids it does not know", "[slurm_step]") {
  env_map env = step_env();
  env.insert_or_assign("SLURM_STEP_ID", "4294967280");  // SLURM_MAX_NORMAL_STEP_ID: a step
  CHECK(read_slurm_step(env).step_id == 4294967280u);
  env.insert_or_assign("SLURM_STEP_ID", "4294967293");  // SLURM_PENDING_STEP runs no process
  CHECK_THAT(step_error(env), Catch::Contains("SLURM_STEP_ID=4294967293 is a special step id "
                                              "muster does not know"));
}

TEST_CASE("slurm step knows no node in salloc's shell on the submit host", "[slurm_step]") {
  // `salloc -N4`: the shell runs where salloc was started; Slurm sets the job's variables but
  // no SLURMD_NODENAME, SLURM_NODEID, SLURM_PROCID or SLURM_LOCALID.
  env_map env = batch_env();
  for (const char* name : {"SLURMD_NODENAME", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID",
                           "SLURM_TASK_PID", "SLURM_GTIDS", "ENVIRONMENT", "SLURM_TOPOLOGY_ADDR"})
    env.erase(name);
  auto step = read_slurm_step(env);
  CHECK_FALSE(step.in_step());
  CHECK(step.nodes.size() == 4);
  CHECK_FALSE(step.node_id);
  CHECK_FALSE(step.this_node());
  CHECK_FALSE(step.node_name);
  // salloc run from a shell on another job's node: SLURMD_NODENAME is not in this job's list.
  env.insert_or_assign("SLURMD_NODENAME", "login07");
  step = read_slurm_step(env);
  CHECK_FALSE(step.node_id);
  CHECK(step.node_name == "login07");
  // SLURMD_NODENAME alone (no SLURM_NODEID) still finds the node.
  env.insert_or_assign("SLURMD_NODENAME", "gpu02");
  CHECK(read_slurm_step(env).this_node() == "gpu02");
}

TEST_CASE("slurm step names the variable, its value and the expectation in errors",
          "[slurm_step]") {
  struct row {
    std::string name;
    std::string value;  // "" with unset=true removes it
    bool unset;
    std::string message;
  };
  const std::vector<row> table = {
      {"SLURM_NNODES", "3", false,
       "SLURM_NNODES=3 but SLURM_JOB_NODELIST=gpu[01-04] names 4 nodes"},
      {"SLURM_JOB_ID", "", true, "SLURM_JOB_ID is not set; this is not a Slurm job"},
      {"SLURM_JOB_ID", "12a", false, "SLURM_JOB_ID=12a is not an integer from 1 to 4294967295"},
      {"SLURM_JOB_ID", "-4", false, "SLURM_JOB_ID=-4 is not an integer"},
      {"SLURM_NTASKS", "31", false, "SLURM_NTASKS=31 but SLURM_TASKS_PER_NODE=8(x4) sums to 32"},
      {"SLURM_NTASKS", "99999999999", false, "SLURM_NTASKS=99999999999 is not an integer"},
      {"SLURM_TASKS_PER_NODE", "8(x3)", false,
       "SLURM_TASKS_PER_NODE=8(x3) gives 3 counts but SLURM_JOB_NODELIST=gpu[01-04] names 4 nodes"},
      {"SLURM_TASKS_PER_NODE", "8(4)", false,
       "SLURM_TASKS_PER_NODE=8(4): malformed repetition \"(4)\" at column 2 of \"8(4)\""},
      {"SLURM_JOB_NODELIST", "gpu[04-01]", false, "SLURM_JOB_NODELIST: hostlist \"gpu[04-01]\""},
      {"SLURM_JOB_NODELIST", "", false, "SLURM_JOB_NODELIST= names no nodes"},
      {"SLURMD_NODENAME", "gpu03", false,
       "SLURMD_NODENAME=gpu03 but SLURM_NODEID=0 is gpu01 in SLURM_JOB_NODELIST=gpu[01-04]"},
      {"SLURM_LOCALID", "8", false,
       "SLURM_LOCALID=8 but SLURM_TASKS_PER_NODE=8(x4) gives node 0 (gpu01) 8 tasks"},
      {"SLURM_JOB_GPUS", "0,1,1", false, "SLURM_JOB_GPUS=0,1,1: GPU 1 appears twice"},
      {"SLURM_JOB_GPUS", "0,", false, "SLURM_JOB_GPUS=0,: trailing ','"},
      {"SLURM_RESTART_COUNT", "x", false, "SLURM_RESTART_COUNT=x is not an integer"},
      {"SLURM_ARRAY_TASK_ID", "3", false,
       "SLURM_ARRAY_TASK_ID=3 is set but SLURM_ARRAY_JOB_ID is not"},
  };
  for (const row& r : table) {
    INFO(r.name << "=" << r.value);
    env_map env = batch_env();
    if (r.unset)
      env.erase(r.name);
    else
      env.insert_or_assign(r.name, r.value);
    CHECK_THAT(step_error(env), Catch::Contains(r.message));
  }
}

TEST_CASE("slurm step checks a step task's ids against the step's layout", "[slurm_step]") {
  env_map env = step_env();
  env.insert_or_assign("SLURM_PROCID", "8");
  CHECK_THAT(step_error(env),
             Catch::Contains("SLURM_PROCID=8 but SLURM_STEP_TASKS_PER_NODE=4(x2) gives 8 tasks"));
  env = step_env();
  env.insert_or_assign("SLURM_NODEID", "2");
  CHECK_THAT(step_error(env),
             Catch::Contains("SLURM_NODEID=2 but SLURM_STEP_NODELIST=gpu[01-02] names 2 nodes"));
  env = step_env();
  env.erase("SLURM_LOCALID");
  CHECK_THAT(step_error(env), Catch::Contains("SLURM_LOCALID is not set; srun sets it"));
  env = step_env();
  env.insert_or_assign("SLURM_STEP_NUM_NODES", "4");
  CHECK_THAT(step_error(env), Catch::Contains("SLURM_STEP_NUM_NODES=4 but SLURM_STEP_NODELIST="
                                              "gpu[01-02] names 2 nodes"));
  env = step_env();
  env.insert_or_assign("SLURM_STEP_NUM_TASKS", "6");
  CHECK_THAT(step_error(env), Catch::Contains("SLURM_STEP_NUM_TASKS=6 but "
                                              "SLURM_STEP_TASKS_PER_NODE=4(x2) sums to 8"));
}

TEST_CASE("slurm step expands the compressed tasks-per-node form", "[slurm_step]") {
  using muster::launcher::expand_tasks_per_node;
  CHECK(expand_tasks_per_node("V", "2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(expand_tasks_per_node("V", "8(x4)") == std::vector<int>{8, 8, 8, 8});
  CHECK(expand_tasks_per_node("V", "1") == std::vector<int>{1});
  CHECK(expand_tasks_per_node("V", "3,1(x2),4") == std::vector<int>{3, 1, 1, 4});
  for (const char* bad : {"", "0", "2(x0)", "2(x)", "2(3)", "x", "2,", ",2", "2(x3", "2(x3)1",
                          "2(x3),,1", "-1", "2(x1048577)", "2(x-1)", "2(x+1)", "2()", "2(x3))"}) {
    INFO("value: \"" << bad << "\"");
    CHECK_THROWS_AS(expand_tasks_per_node("V", bad), muster::error);
  }
}

TEST_CASE("slurm step says what is wrong in a tasks-per-node value, and where", "[slurm_step]") {
  using muster::launcher::expand_tasks_per_node;
  struct row {
    std::string value;
    std::string message;
  };
  const std::vector<row> table = {
      {"2(xa)", "V=2(xa): malformed repetition \"(xa)\" at column 2 of \"2(xa)\""},
      {"1,2(3)", "V=1,2(3): malformed repetition \"(3)\" at column 4 of \"2(3)\""},
      {"2(x3", "malformed repetition \"(x3\" at column 2"},
      {"4,2(x0)",
       "V=4,2(x0): repetition \"(x0)\" at column 4 of \"2(x0)\" is not from (x1) to "
       "(x1048576)"},
      {"2(x1048577)", "repetition \"(x1048577)\" at column 2"},
      {"2,x(x2)", "V=2,x(x2): \"x\" at column 3 is not a task count from 1 to 2147483647"},
      {"2,,1", "V=2,,1: empty entry between the commas at columns 2 and 3"},
      {"2,", "V=2,: trailing ','"},
      {",2", "V=,2: leading ','"},
      {"1(x1048576),1", "more than 1048576 nodes by \"1\" at column 13"},
  };
  for (const row& r : table) {
    INFO("value: \"" << r.value << "\"");
    std::string message = muster::test::expect_error(muster::errc::environment,
                                                     [&] { expand_tasks_per_node("V", r.value); });
    CHECK_THAT(message, Catch::Contains(r.message));
    CHECK_THAT(message, Catch::EndsWith("expected counts like 2(x3),1"));
  }
}

TEST_CASE("slurm step parses GPU index lists strictly", "[slurm_step]") {
  using muster::launcher::parse_gpu_indices;
  CHECK(parse_gpu_indices("V", "").empty());
  CHECK(parse_gpu_indices("V", "0,1,3") == std::vector<int>{0, 1, 3});
  CHECK(parse_gpu_indices("V", "0-2,7") == std::vector<int>{0, 1, 2, 7});
  for (const char* bad : {",", "1,", ",1", "a", "1-0", "-1", "0-2,1", "1.5", "0-99999"}) {
    INFO("value: \"" << bad << "\"");
    CHECK_THROWS_AS(parse_gpu_indices("V", bad), muster::error);
  }
  CHECK_THAT(
      muster::test::expect_error(muster::errc::environment, [] { parse_gpu_indices("V", "0,,1"); }),
      Catch::Contains("V=0,,1: empty entry between the commas at columns 2 and 3"));
  CHECK_THAT(muster::test::expect_error(muster::errc::environment,
                                        [] { parse_gpu_indices("V", "0,3-1"); }),
             Catch::Contains("V=0,3-1: \"3-1\" at column 3 is not an index or a rising range"));
}

TEST_CASE("slurm step reads the real process environment", "[slurm_step]") {
  ::setenv("MUSTER_TEST_SLURM_STEP_PROBE", "a=b", 1);
  auto env = muster::launcher::process_env();
  ::unsetenv("MUSTER_TEST_SLURM_STEP_PROBE");
  REQUIRE(env.contains("MUSTER_TEST_SLURM_STEP_PROBE"));
  CHECK(env.at("MUSTER_TEST_SLURM_STEP_PROBE") == "a=b");
  CHECK_FALSE(muster::launcher::inside_slurm({{"PATH", "/bin"}}));
}

// read_slurm_step on environments captured from real Slurm 22.05 jobs (tests/launcher/slurm_env,
// see its README for how each was made): what muster derives must match the job that was run.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "launcher/slurm_step.hpp"
#include "tests/support/temp_dir.hpp"

using muster::launcher::env_map;
using muster::launcher::read_slurm_step;
using muster::launcher::slurm_step;

namespace {

env_map captured(const std::string& name) {
  auto file =
      std::filesystem::path(MUSTER_SOURCE_DIR) / "tests/launcher/slurm_env" / (name + ".env");
  std::istringstream lines(muster::test::read_file(file));
  env_map env;
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  REQUIRE(env.contains("SLURM_JOB_ID"));
  return env;
}

const std::vector<std::string> kNodes = {"gpu-a01", "gpu-a02"};

}  // namespace

TEST_CASE("captured srun -N2 --ntasks-per-node=2 gives 4 tasks, 2 per node", "[slurm_step]") {
  slurm_step first = read_slurm_step(captured("srun-N2-ntasks-per-node2.task0"));
  CHECK(first.in_step());
  CHECK(first.nodes == kNodes);
  CHECK(first.tasks_per_node == std::vector<int>{2, 2});
  CHECK(first.num_tasks == 4);
  CHECK(first.ntasks_per_node == 2);
  CHECK((first.proc_id == 0 && first.local_id == 0 && first.node_id == 0));
  CHECK(first.this_node() == "gpu-a01");
  CHECK(first.restart_count == 0);
  CHECK(first.cluster_name == "mustertest");  // ClusterName of slurm.conf
  CHECK_FALSE(first.visible_devices.has_value());
  slurm_step last = read_slurm_step(captured("srun-N2-ntasks-per-node2.task3"));
  CHECK((last.proc_id == 3 && last.local_id == 1 && last.node_id == 1));
  CHECK(last.this_node() == "gpu-a02");
}

TEST_CASE("captured srun -N2 -n3 puts 2 tasks on the first node and 1 on the second",
          "[slurm_step]") {
  slurm_step s = read_slurm_step(captured("srun-N2-n3.task2"));
  CHECK(s.tasks_per_node == std::vector<int>{2, 1});
  CHECK(s.num_tasks == 3);
  CHECK_FALSE(s.ntasks_per_node.has_value());
  CHECK((s.proc_id == 2 && s.local_id == 0 && s.node_id == 1));
  CHECK(read_slurm_step(captured("srun-N2-n3.task0")).cpus_on_node == 2);
  CHECK(s.cpus_on_node == 1);
}

TEST_CASE("captured batch script reads as the job, not a step", "[slurm_step]") {
  slurm_step s = read_slurm_step(captured("sbatch-N2-ntasks-per-node2.batch"));
  CHECK_FALSE(s.in_step());
  CHECK(s.nodes == kNodes);
  CHECK(s.tasks_per_node == std::vector<int>{2, 2});
  CHECK(s.this_node() == "gpu-a01");
  CHECK(s.submit_dir == "/tmp/envs");
}

TEST_CASE("captured srun inside the batch script keeps the job's 2 tasks per node",
          "[slurm_step]") {
  // The script asked srun for --ntasks-per-node=1; Slurm ignored it and started 4 tasks.
  slurm_step s = read_slurm_step(captured("sbatch-N2-ntasks-per-node2.step-task2"));
  CHECK(s.in_step());
  CHECK(s.tasks_per_node == std::vector<int>{2, 2});
  CHECK((s.proc_id == 2 && s.local_id == 0 && s.node_id == 1));
  slurm_step t1 = read_slurm_step(captured("sbatch-N2-ntasks-per-node2.step-task1"));
  CHECK((t1.proc_id == 1 && t1.local_id == 1 && t1.node_id == 0));
}

TEST_CASE("captured array task knows its array job and task ids", "[slurm_step]") {
  slurm_step s = read_slurm_step(captured("sbatch-array3-4.task4.batch"));
  CHECK(s.array_job_id == 4u);
  CHECK(s.array_task_id == 4u);
  CHECK(s.num_nodes == 1);
  CHECK(s.num_tasks == 1);
}

TEST_CASE("captured --gres=gpu:4 step sees all four GPUs in every task", "[slurm_step]") {
  for (const char* name : {"srun-N2-gres-gpu4.task0", "srun-N2-gres-gpu4.task3"}) {
    INFO(name);
    slurm_step s = read_slurm_step(captured(name));
    CHECK(s.step_gpus == std::vector<int>{0, 1, 2, 3});
    CHECK(s.gpus_on_node == 4);
    REQUIRE(s.visible_devices.has_value());
    CHECK(*s.visible_devices == std::vector<std::string>{"0", "1", "2", "3"});
  }
}

TEST_CASE("captured --gpus-per-task=1 step shows each task only its own GPU", "[slurm_step]") {
  slurm_step t1 = read_slurm_step(captured("srun-N2-gpus-per-task1.task1"));
  CHECK(t1.local_id == 1);
  CHECK(t1.step_gpus == std::vector<int>{1});
  CHECK(*t1.visible_devices == std::vector<std::string>{"1"});
  CHECK(t1.gpus_on_node == 2);  // the node's allocation, not the task's
  slurm_step t3 = read_slurm_step(captured("srun-N2-gpus-per-task1.task3"));
  CHECK((t3.node_id == 1 && t3.local_id == 1));
  CHECK(*t3.visible_devices == std::vector<std::string>{"1"});
}

TEST_CASE("captured --gres=gpu:2 batch job and its step see GPUs 0 and 1", "[slurm_step]") {
  slurm_step batch = read_slurm_step(captured("sbatch-N2-gres-gpu2.batch"));
  CHECK_FALSE(batch.in_step());
  CHECK(batch.job_gpus == std::vector<int>{0, 1});
  CHECK(batch.step_gpus.empty());
  CHECK(batch.tasks_per_node == std::vector<int>{1, 1});
  slurm_step step = read_slurm_step(captured("sbatch-N2-gres-gpu2.step-task1"));
  CHECK(step.job_gpus == std::vector<int>{0, 1});
  CHECK(step.step_gpus == std::vector<int>{0, 1});
  CHECK((step.proc_id == 1 && step.node_id == 1));
  CHECK(step.this_node() == "gpu-a02");
}

TEST_CASE("captured salloc shell reads the job but knows no node of it", "[slurm_step]") {
  // salloc's shell runs on the submit host: no SLURMD_NODENAME, SLURM_NODEID or SLURM_PROCID.
  env_map env = captured("salloc-N2.shell");
  REQUIRE_FALSE(env.contains("SLURMD_NODENAME"));
  REQUIRE_FALSE(env.contains("SLURM_NODEID"));
  slurm_step s = read_slurm_step(env);
  CHECK_FALSE(s.in_step());
  CHECK(s.nodes == kNodes);
  CHECK(s.tasks_per_node == std::vector<int>{1, 1});
  CHECK_FALSE(s.node_id.has_value());
  CHECK_FALSE(s.this_node().has_value());
  CHECK_FALSE(s.node_name.has_value());
  CHECK_FALSE(s.visible_devices.has_value());
  CHECK(s.submit_dir == "/tmp/envs");
}

TEST_CASE("captured interactive step reads as the whole job on its first node", "[slurm_step]") {
  // SLURM_STEP_ID=4294967290 with SLURM_STEP_NODELIST=gpu-a01 and one task: the step variables
  // describe the shell, not the allocation of two nodes.
  env_map env = captured("salloc-N2-gres-gpu2.interactive-step");
  REQUIRE(env.at("SLURM_STEP_ID") == "4294967290");
  REQUIRE(env.at("SLURM_STEP_NODELIST") == "gpu-a01");
  slurm_step s = read_slurm_step(env);
  CHECK_FALSE(s.in_step());
  CHECK(s.nodelist == "gpu-a[01-02]");
  CHECK(s.nodes == kNodes);
  CHECK(s.tasks_per_node == std::vector<int>{1, 1});
  CHECK(s.node_id == 0);
  CHECK(s.this_node() == "gpu-a01");
  CHECK(s.job_gpus == std::vector<int>{0, 1});
  REQUIRE(s.visible_devices.has_value());
  CHECK(*s.visible_devices == std::vector<std::string>{"0", "1"});
}

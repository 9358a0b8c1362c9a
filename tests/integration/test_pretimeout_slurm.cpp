// The pre-timeout checkpoint and requeue cycle of a muster-sbatch job running the built-in
// engine, in a real Slurm on loopback (tests/support/slurm_cluster.hpp): Slurm's
// --signal=B:USR1@N reaches the batch shell, whose trap passes it to srun, the launchers and
// every muster-train rank; the ranks checkpoint the same step and stop; node 0's launcher
// requeues the job; the job comes back with SLURM_RESTART_COUNT=1 and resumes from the
// checkpoint at the next step in the same run directory, and `muster status` shows one run
// with one restart.
// Skipped, with "SKIPPED: <reason>", where the cluster cannot run (not root, no Slurm).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/run_reader.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using muster::test::slurm_cluster;
using muster::test::wait_for;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kSbatch = std::string(MUSTER_BIN_DIR) + "/muster-sbatch";

// Two nodes, 2 ranks each, a 2-minute limit and USR1 100 s before it: Slurm checks time
// limits every 30 s, so the signal comes 20 to 50 s after the start, when every rank is well
// inside its training loop. The restart's own warning comes no sooner than 20 s after it
// starts, long after its two remaining steps.
std::string job_file(int steps) {
  return "[job]\nname = \"pt\"\n[slurm]\nnodes = 2\ntime = \"2:00\"\ncheckpoint_lead = 100\n"
         "requeue = true\n" +
         muster::test::tiny_job(steps);
}

// The steps saved under `checkpoints` (step-00000012 -> 12).
std::vector<int> saved_steps(const fs::path& checkpoints) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints, ec))
    if (e.path().filename().string().starts_with("step-"))
      out.push_back(std::stoi(e.path().filename().string().substr(5)));
  return out;
}

}  // namespace

TEST_CASE(
    "muster-sbatch's pre-timeout USR1: the engine checkpoints, the job requeues and "
    "resumes at the next step in the same run",
    "[slurm][requeue]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  muster::test::slurm_cluster_options options;
  options.cred_expire_s = 5;  // a requeued job may start again 6 s after the requeue
  slurm_cluster cluster(options);
  muster::test::temp_dir dir("muster-pretimeout");
  const auto job = dir / "job.toml";
  const auto runs = dir / "runs";
  muster::test::write_file(job, job_file(100000));  // the first start runs until the signal
  auto env = cluster.env();
  env.set["OMP_NUM_THREADS"] = "1";  // 4 ranks on this machine's cores
  const auto submitted =
      muster::test::run_process({kSbatch, job.string(), "launch.runs_dir=" + runs.string(),
                                 "launch.master_addr=127.0.0.1", "launch.nproc=2"},
                                env);
  INFO("muster-sbatch: " << submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const auto job_id = static_cast<std::uint32_t>(std::stoul(submitted.out));
  const auto run_dir = runs / ("pt-" + std::to_string(job_id));
  const auto checkpoints = run_dir / "checkpoints";
  auto field = [&](const char* name) { return cluster.job_field(job_id, name); };
  auto context = [&] {
    std::string out;
    try {
      out = muster::test::read_file(runs / ("slurm-" + std::to_string(job_id) + ".out"));
    } catch (const std::exception&) {
    }
    return "JobState=" + field("JobState") + " Restarts=" + field("Restarts") +
           "\nbatch output:\n" + out + cluster.log_tail();
  };

  // The first start: trains until Slurm's USR1, saves, stops, and node 0 requeues the job.
  auto requeued = [&] { return field("Restarts") == "1" && field("JobState") == "PENDING"; };
  if (!wait_for(requeued, 90s)) FAIL("no requeue within 90 s: " << context());
  const auto saved = saved_steps(checkpoints);
  INFO(context());
  REQUIRE(saved.size() == 1);
  const int step = saved[0];
  CHECK(step >= 1);
  // The restart resumes and ends two steps later.
  muster::test::write_file(job, job_file(step + 2));
  auto ended = [&] { return slurm_cluster::finished(field("JobState")); };
  if (!wait_for(ended, 60s)) FAIL("the restart did not end within 60 s: " << context());
  CHECK(field("JobState") == "COMPLETED");
  CHECK(field("Restarts") == "1");

  // One run directory for both starts.
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(runs))
    if (e.is_directory() && e.path().filename() != "sbatch") dirs.push_back(e.path());
  CHECK(dirs == std::vector<fs::path>{run_dir});
  // Every rank saved the same step on the signal and stopped after it.
  for (int rank = 0; rank < 4; ++rank) {
    const auto log = muster::test::read_file(run_dir / "logs" / fmt::format("rank-{}.log", rank));
    INFO("rank " << rank << " log:\n" << log);
    CHECK_THAT(log, Catch::Contains(fmt::format("stopping after step {}", step)));
  }
  // The store: steps 0 .. step+1 once per rank, so the restart began at the step after the
  // checkpoint; the requeue on node 0 and a resume on each node.
  muster::store::run_reader reader(run_dir);
  CHECK(reader.hosts() == slurm_cluster::nodes());  // both nodes' stores, 2 ranks each
  for (const auto& rank : reader.ranks()) {
    CHECK(rank.host == (rank.rank < 2 ? "gpu-a01" : "gpu-a02"));
    CHECK(rank.state == muster::store::rank_state::succeeded);
  }
  std::map<std::int64_t, std::multiset<std::int64_t>> steps_of_rank;
  for (const auto& s : reader.steps()) steps_of_rank[s.rank].insert(s.step);
  REQUIRE(steps_of_rank.size() == 4);
  std::multiset<std::int64_t> expected;
  for (int s = 0; s < step + 2; ++s) expected.insert(s);
  for (const auto& [rank, steps] : steps_of_rank) {
    INFO("rank " << rank);
    CHECK(steps == expected);
  }
  int requeues = 0, resumed = 0;
  for (const auto& e : reader.events()) {
    requeues += e.kind == "requeue";
    resumed += e.kind == "resumed" && e.message.find("SLURM_RESTART_COUNT=1") != std::string::npos;
  }
  CHECK(requeues == 1);
  CHECK(resumed == 2);
  // what node 0 compared before it asked for the requeue: rank 0's steps at its first report of
  // each start (the second's from the checkpoint on, not the steps file's earlier lines)
  std::vector<std::string> first_reports;
  for (const auto& e : reader.events())
    if (e.kind == "first_step") first_reports.push_back(e.message);
  REQUIRE(first_reports.size() == 2);
  CHECK_THAT(first_reports[0], Catch::StartsWith("rank 0 had done 0 steps at its first report"));
  CHECK_THAT(first_reports[1],
             Catch::StartsWith(fmt::format("rank 0 had done {} steps at its first report", step)));

  // muster status: one run, one restart, every step done
  const auto list = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.string(), "--json"}, cluster.env());
  const auto listed = nlohmann::json::parse(list.out);
  CHECK(listed["runs"].size() == 1);
  const auto one =
      muster::test::run_process({kMuster, "status", run_dir.string(), "--json"}, cluster.env());
  INFO(one.out << one.err);
  const auto status = nlohmann::json::parse(one.out);
  CHECK(status["restarts"] == 1);
  CHECK(status["steps_done"] == step + 2);
  CHECK(status["run"]["state"] == "succeeded");
}

TEST_CASE("etc/examples/muster.sbatch runs as written on two nodes with the engine", "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  // The script names etc/examples/tiny-moe.toml from the submit directory and muster on PATH:
  // a submit directory with a copy of the example job, cut to 3 steps.
  muster::test::temp_dir dir("muster-example");
  fs::create_directories(dir / "etc/examples");
  auto job =
      muster::test::read_file(std::string(MUSTER_SOURCE_DIR) + "/etc/examples/tiny-moe.toml");
  const auto steps_at = job.find("\nsteps = ");
  REQUIRE(steps_at != std::string::npos);
  job.replace(steps_at, job.find('\n', steps_at + 1) - steps_at, "\nsteps = 3");
  muster::test::write_file(dir / "etc/examples/tiny-moe.toml", job);
  fs::create_directories(dir / "muster-runs");  // Slurm creates no directory for --output
  // The loopback nodes' names do not resolve, so the `muster` the script finds on PATH is a
  // wrapper that adds launch.master_addr=127.0.0.1, as every launch in these tests does.
  fs::create_directories(dir / "bin");
  muster::test::write_file(dir / "bin/muster", "#!/bin/sh\nexec '" + kMuster +
                                                   "' \"$@\" launch.master_addr=127.0.0.1\n");
  fs::permissions(dir / "bin/muster", fs::perms::owner_all);
  auto env = cluster.env();
  env.set["PATH"] = (dir / "bin").string() + ":" + std::getenv("PATH");
  env.set["OMP_NUM_THREADS"] = "1";
  // this cluster has no GPUs: the command line overrides the script's --gpus-per-node
  const auto submitted = muster::test::run_process(
      {slurm_cluster::program("sbatch"), "--parsable", "--chdir=" + dir.path().string(),
       "--gpus-per-node=0", std::string(MUSTER_SOURCE_DIR) + "/etc/examples/muster.sbatch"},
      env);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const auto job_id = static_cast<std::uint32_t>(std::stoul(submitted.out));
  const auto output = dir / "muster-runs" / ("slurm-" + std::to_string(job_id) + ".out");
  auto state = [&] { return cluster.job_field(job_id, "JobState"); };
  const bool done = wait_for([&] { return slurm_cluster::finished(state()); }, 90s);
  std::string text;
  if (fs::exists(output)) text = muster::test::read_file(output);
  INFO("JobState=" << state() << "\nbatch output:\n" << text << cluster.log_tail());
  REQUIRE(done);
  CHECK(state() == "COMPLETED");
  const auto run_dir = dir / "muster-runs" / ("tiny-moe-" + std::to_string(job_id));
  muster::store::run_reader reader(run_dir);
  CHECK(reader.hosts() == slurm_cluster::nodes());
  REQUIRE(reader.ranks().size() == 4);
  for (const auto& rank : reader.ranks()) CHECK(rank.state == muster::store::rank_state::succeeded);
  std::set<std::int64_t> steps;
  for (const auto& s : reader.steps()) steps.insert(s.step);
  CHECK(steps == std::set<std::int64_t>{0, 1, 2});
  // Slurm's output linked into the run directory, where muster diagnose reads it
  CHECK(fs::is_symlink(run_dir / "slurm.out"));
  CHECK(fs::equivalent(run_dir / "slurm.out", output));
}

// `muster launch` under a real srun and sbatch: each test brings up its own Slurm on loopback
// (slurmctld and two slurmd playing gpu-a01 and gpu-a02, tests/support/slurm_cluster.hpp) and
// runs muster and its stand-in worker (muster-test-worker) as Slurm tasks. The node names do
// not resolve, so every launch says launch.master_addr=127.0.0.1; the run directory is a temp
// directory both "nodes" share, as a shared filesystem would be.
// (test_slurm_launch.cpp runs the same binary with a simulated step environment instead.)
// Skipped, with "SKIPPED: <reason>" (ctest: Skipped), when the cluster cannot run here: not
// root, or Slurm or munge not installed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/run_reader.hpp"
#include "tests/support/launch_output.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using muster::test::contract_lines;
using muster::test::has_event;
using muster::test::process_result;
using muster::test::slurm_cluster;
using muster::test::wait_for;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kWorker = std::string(MUSTER_BIN_DIR) + "/muster-test-worker";

// The cluster's command environment, with the launcher's chatter down to warnings.
muster::test::env_change launch_env(const slurm_cluster& cluster) {
  auto env = cluster.env();
  env.set["MUSTER_LOG_LEVEL"] = "warn";
  return env;
}

// srun [srun_options] muster launch <runs> master_addr [overrides] -- muster-test-worker [args]
std::vector<std::string> srun_launch(const std::vector<std::string>& srun_options,
                                     const fs::path& runs, std::vector<std::string> overrides,
                                     std::vector<std::string> worker_args) {
  std::vector<std::string> args = {slurm_cluster::program("srun")};
  args.insert(args.end(), srun_options.begin(), srun_options.end());
  args.insert(args.end(), {kMuster, "launch", "launch.runs_dir=" + runs.string(),
                           "launch.master_addr=127.0.0.1"});
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.push_back("--");
  args.push_back(kWorker);
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  return args;
}

fs::path run_dir_of(const fs::path& runs, std::uint32_t job_id) {
  return runs / ("muster-job-" + std::to_string(job_id));
}

fs::path rank_log(const fs::path& run_dir, int rank) {
  return run_dir / "logs" / ("rank-" + std::to_string(rank) + ".log");
}

// Whether `has(rank)` holds for each of the 4 ranks.
bool every_rank(const std::function<bool(int)>& has) {
  for (int rank = 0; rank < 4; ++rank)
    if (!has(rank)) return false;
  return true;
}

// The rank's worker has written its contract line (it runs).
bool rank_started(const fs::path& run_dir, int rank) {
  std::error_code ec;
  return fs::file_size(rank_log(run_dir, rank), ec) > 0 && !ec;
}

// The rank's worker got SIGUSR1 (it creates this file then).
bool rank_got_usr1(const fs::path& run_dir, int rank) {
  return fs::exists(run_dir / ("signal-SIGUSR1-rank-" + std::to_string(rank)));
}

// A command running in the background (output in a file): ended with SIGTERM, then SIGKILL,
// when the test leaves without waiting for it.
class background {
 public:
  background(const std::vector<std::string>& argv, const muster::test::env_change& env,
             fs::path log)
      : log_(std::move(log)), pid_(muster::test::spawn_logged(argv, env, log_)) {}
  ~background() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (!wait(5s)) {
      ::kill(pid_, SIGKILL);
      muster::test::wait_process(pid_);
    }
  }
  background(const background&) = delete;
  background& operator=(const background&) = delete;

  // Waits up to `limit` for the command to end; its result, or std::nullopt while it runs.
  std::optional<process_result> wait(clock_type::duration limit) {
    std::optional<process_result> result;
    wait_for([&] { return pid_ <= 0 || (result = muster::test::try_wait_process(pid_)); }, limit);
    if (result) pid_ = -1;
    return result;
  }
  std::string output() const { return muster::test::read_file(log_); }

 private:
  fs::path log_;
  pid_t pid_;
};

// The events of one node's store alone (run_reader merges every node-*.db of a directory, so
// it reads a copy of that one file).
std::vector<muster::store::event_record> node_events(const fs::path& run_dir,
                                                     const std::string& host) {
  muster::test::temp_dir one("muster-node-db");
  fs::copy_file(run_dir / ("node-" + host + ".db"), one / ("node-" + host + ".db"));
  return muster::store::run_reader(one.path()).events();
}

}  // namespace

TEST_CASE(
    "the Slurm harness stops its jobs and every daemon it started, by pid, when a test "
    "fails",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  muster::test::temp_dir keep("muster-harness");
  std::vector<pid_t> pids;
  fs::path dir;
  try {
    slurm_cluster cluster;
    pids = cluster.daemon_pids();
    dir = cluster.dir();
    // a job left running, as a failing test leaves it
    REQUIRE(cluster
                .command({"sbatch", "-N2", "-o", "/dev/null", "--wrap",
                          "echo $$ > '" + (keep / "batch.pid").string() + "'; sleep 300"})
                .exit_code == 0);
    REQUIRE(wait_for([&] { return fs::exists(keep / "batch.pid"); }, 20s));
    throw std::runtime_error("the test failed here");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "the test failed here");
  }
  REQUIRE(pids.size() >= 3);  // slurmctld and two slurmd (and munged, when it started one)
  for (const pid_t pid : pids) {
    INFO("daemon pid " << pid);
    CHECK(::kill(pid, 0) != 0);  // stopped and reaped
  }
  const auto batch = static_cast<pid_t>(std::stol(muster::test::read_file(keep / "batch.pid")));
  CHECK(::kill(batch, 0) != 0);  // the job's batch shell is gone with its job
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("srun -N2 with one task per node: muster launch starts 4 ranks with global ranks",
          "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  auto r = muster::test::run_process(srun_launch({"-N2", "--ntasks-per-node=1"}, runs.path(),
                                                 {"launch.nproc=2"}, {"--sleep-ms", "100"}),
                                     launch_env(cluster));
  INFO("srun stdout: " << r.out << "\nsrun stderr: " << r.err << "\n" << cluster.log_tail());
  REQUIRE(r.exit_code == 0);
  const auto dir = run_dir_of(runs.path(), cluster.first_job_id());
  REQUIRE(fs::is_directory(dir));
  CHECK(fs::exists(dir / "node-gpu-a01.db"));
  CHECK(fs::exists(dir / "node-gpu-a02.db"));
  std::set<int> ports;
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    auto lines = contract_lines(muster::test::read_file(rank_log(dir, rank)));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == muster::test::two_nodes_of_two(rank, lines[0].port));
    ports.insert(lines[0].port);
  }
  CHECK(ports.size() == 1);
  muster::store::run_reader reader(dir);
  CHECK(reader.hosts() == slurm_cluster::nodes());
  REQUIRE(reader.run());
  CHECK(reader.run()->slurm_job_id == std::to_string(cluster.first_job_id()));
  for (const auto& rank : reader.ranks()) {
    CHECK(rank.state == muster::store::rank_state::succeeded);
    CHECK(rank.host == (rank.rank < 2 ? "gpu-a01" : "gpu-a02"));
  }
}

TEST_CASE(
    "srun --kill-on-bad-exit: a rank failing on gpu-a02 ends the step with its exit code "
    "within seconds, the first failure recorded on both nodes",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  std::vector<std::string> srun_options = {"-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1"};
  bool labelled = false;
  SECTION("srun without --label") {}
  SECTION("srun --label, as muster-sbatch writes it") {
    srun_options.push_back("--label");
    labelled = true;
  }
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  const auto start = clock_type::now();
  auto r = muster::test::run_process(srun_launch(srun_options, runs.path(), {"launch.nproc=2"},
                                                 {"--only-rank", "3", "--exit-code", "3",
                                                  "--after-ms", "300", "--sleep-ms", "60000"}),
                                     launch_env(cluster));
  const auto elapsed = clock_type::now() - start;
  INFO("srun stdout: " << r.out << "\nsrun stderr: " << r.err << "\n" << cluster.log_tail());
  CHECK(r.exit_code == 3);
  CHECK(elapsed < 5s);  // the other ranks run for 60 s unless stopped
  const auto dir = run_dir_of(runs.path(), cluster.first_job_id());
  CHECK(has_event(node_events(dir, "gpu-a02"), "first_failure", "rank 3 on gpu-a02 (pid "));
  CHECK(has_event(node_events(dir, "gpu-a01"), "first_failure_elsewhere",
                  "rank 3 on gpu-a02 failed first"));
  muster::store::run_reader reader(dir);
  for (const auto& rank : reader.ranks()) {
    INFO("rank " << rank.rank);
    CHECK(rank.state ==
          (rank.rank == 3 ? muster::store::rank_state::failed : muster::store::rank_state::killed));
  }
  // diagnose with srun's output: its "gpu-a02: task 1" is node 1's launcher, not rank 1
  CHECK_THAT(r.err, Catch::Contains("srun: error: gpu-a02: task 1: Exited with exit code 3"));
  const auto srun_out = runs / "srun.out";
  muster::test::write_file(srun_out, r.err);
  const auto diagnosed = muster::test::run_process(
      {kMuster, "diagnose", dir.string(), "--log", srun_out.string(), "--json"});
  INFO("diagnose: " << diagnosed.out << diagnosed.err);
  CHECK(diagnosed.exit_code == 1);
  const auto findings = nlohmann::json::parse(diagnosed.out)["findings"];
  REQUIRE(findings.size() >= 2);
  CHECK(findings[0]["ranks"] == nlohmann::json::array({3}));
  bool launcher = false;
  for (const auto& f : findings) {
    CHECK(f["ranks"] != nlohmann::json::array({1}));
    // each launcher exits with its job's first failure's code
    if (f["summary"].get<std::string>().starts_with(
            "muster's launchers on gpu-a01, gpu-a02 exited with exit code 3")) {
      launcher = true;
      CHECK_FALSE(f["root"].get<bool>());
    }
  }
  CHECK(launcher);
  // srun's output alone says the same: each launcher's first line tells its tasks apart
  CHECK_THAT(r.err, Catch::Contains("muster: node 1 of 2 (gpu-a02) starts ranks 2-3 of 4; run "
                                    "directory " +
                                    dir.string()));
  const auto alone =
      muster::test::run_process({kMuster, "diagnose", "--log", srun_out.string(), "--json"});
  INFO("diagnose --log alone: " << alone.out << alone.err);
  CHECK(alone.exit_code == 1);
  const auto alone_doc = nlohmann::json::parse(alone.out);
  for (const auto& f : alone_doc["findings"]) CHECK(f["ranks"] != nlohmann::json::array({1}));
  // the launchers' word on the rank that failed first makes it the root, and their ends its
  // knock-on
  const auto& alone_root = alone_doc["findings"].at(0);
  CHECK(alone_root["root"].get<bool>());
  CHECK(alone_root["ranks"] == nlohmann::json::array({3}));
  CHECK(alone_root["hosts"] == nlohmann::json::array({"gpu-a02"}));
  CHECK_THAT(alone_root["summary"].get<std::string>(),
             Catch::StartsWith("rank 3 on gpu-a02 failed with exit code 3"));
  if (labelled)  // each launcher's lines carry its task
    CHECK_THAT(r.err, Catch::Contains("\n1: muster: rank 3 on gpu-a02 failed first (exit code 3)"));
}

TEST_CASE("srun -N2 --ntasks-per-node=2: each task execs its worker as one rank", "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  auto r = muster::test::run_process(
      srun_launch({"-N2", "--ntasks-per-node=2"}, runs.path(), {},
                  {"--heartbeat-ms", "50", "--steps", "3", "--sleep-ms", "400"}),
      launch_env(cluster));
  INFO("srun stdout: " << r.out << "\nsrun stderr: " << r.err << "\n" << cluster.log_tail());
  REQUIRE(r.exit_code == 0);
  auto lines = contract_lines(r.out);  // every task's worker wrote to srun's stdout
  REQUIRE(lines.size() == 4);
  std::set<int> ranks, ports;
  for (const auto& line : lines) {
    INFO("rank " << line.rank);
    ranks.insert(line.rank);
    ports.insert(line.port);
    CHECK(line.world == 4);
    CHECK(line.local == line.rank % 2);
    CHECK(line.local_world == 2);
    CHECK(line.node == line.rank / 2);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(ports.size() == 1);  // one MASTER_PORT, handed out through the rendezvous
  muster::store::run_reader reader(run_dir_of(runs.path(), cluster.first_job_id()));
  CHECK(reader.hosts() == slurm_cluster::nodes());
  CHECK(reader.ranks().size() == 4);
  CHECK(has_event(reader.events(), "exec", "rank 3 on gpu-a02 execs"));
  // no launcher records the ranks' ends nor copies their steps: status reads the steps they
  // left, and has Slurm say the job is over
  const auto dir = run_dir_of(runs.path(), cluster.first_job_id());
  const auto status =
      muster::test::run_process({kMuster, "status", dir.string(), "--json"}, launch_env(cluster));
  INFO("status: " << status.out << status.err);
  REQUIRE(status.exit_code == 0);
  const auto doc = nlohmann::json::parse(status.out);
  CHECK(doc["one_task_per_rank"] == true);
  CHECK(doc["lost"] == false);
  CHECK(doc["slurm_ended"] == "COMPLETED");
  CHECK(doc["steps_done"] >= 3);  // a beat a step, while it sleeps
  std::set<int> stepped;
  for (const auto& step : doc["history"]) stepped.insert(step["rank"].get<int>());
  CHECK(stepped == std::set<int>{0, 1, 2, 3});
  const auto text =
      muster::test::run_process({kMuster, "status", dir.string()}, launch_env(cluster));
  CHECK_THAT(text.out, Catch::Contains("(ended: Slurm says COMPLETED, updated ") &&
                           Catch::Contains("tasks     one Slurm task per rank"));
  // and diagnose says where their output is
  const auto diagnosis =
      muster::test::run_process({kMuster, "diagnose", dir.string()}, launch_env(cluster));
  CHECK_THAT(diagnosis.out,
             Catch::Contains("note: its ranks were their own Slurm tasks") &&
                 Catch::Contains("--log slurm-" + std::to_string(cluster.first_job_id()) + ".out"));
}

TEST_CASE("srun --mpi=pmix: the launchers find node 0's store through PMIx", "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  SECTION("one task per node") {
    auto r = muster::test::run_process(srun_launch({"--mpi=pmix", "-N2", "--ntasks-per-node=1"},
                                                   runs.path(), {"launch.nproc=2"}, {}),
                                       launch_env(cluster));
    INFO("srun stdout: " << r.out << "\nsrun stderr: " << r.err << "\n" << cluster.log_tail());
    REQUIRE(r.exit_code == 0);
    const auto dir = run_dir_of(runs.path(), cluster.first_job_id());
    CHECK(has_event(node_events(dir, "gpu-a01"), "rendezvous", ", published through PMIx)"));
    CHECK(has_event(node_events(dir, "gpu-a02"), "rendezvous", "(PMIx)"));
    for (int rank = 0; rank < 4; ++rank)
      CHECK(contract_lines(muster::test::read_file(rank_log(dir, rank))).size() == 1);
  }
  SECTION("one task per rank") {
    auto env = launch_env(cluster);
    env.set["MUSTER_LOG_LEVEL"] = "info";  // the launchers say where they found the store
    auto r = muster::test::run_process(
        srun_launch({"--mpi=pmix", "-N2", "--ntasks-per-node=2"}, runs.path(), {}, {}), env);
    INFO("srun stdout: " << r.out << "\nsrun stderr: " << r.err << "\n" << cluster.log_tail());
    REQUIRE(r.exit_code == 0);
    CHECK(contract_lines(r.out).size() == 4);
    const std::string both = r.out + r.err;
    std::size_t through_pmix = 0;
    for (auto at = both.find("(found through PMIx)"); at != std::string::npos;
         at = both.find("(found through PMIx)", at + 1))
      ++through_pmix;
    CHECK(through_pmix == 3);  // every task but rank 0, which hosts the store
  }
}

TEST_CASE("scancel -s USR1 reaches every worker through srun and the launchers", "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  const auto job = std::to_string(cluster.first_job_id());
  const auto dir = run_dir_of(runs.path(), cluster.first_job_id());
  background srun(srun_launch({"-N2", "--ntasks-per-node=1"}, runs.path(), {"launch.nproc=2"},
                              {"--sleep-ms", "60000"}),
                  launch_env(cluster), runs / "srun.log");
  auto context = [&] { return "srun output:\n" + srun.output() + cluster.log_tail(); };
  if (!wait_for([&] { return every_rank([&](int r) { return rank_started(dir, r); }); }, 20s))
    FAIL("the 4 ranks did not start within 20 s; " << context());
  // Without --batch or --full, scancel signals every process of every step of the job (the
  // launchers and their workers), not a batch shell.
  REQUIRE(cluster.command({"scancel", "-s", "USR1", job}).exit_code == 0);
  if (!wait_for([&] { return every_rank([&](int r) { return rank_got_usr1(dir, r); }); }, 10s))
    FAIL("not every worker got SIGUSR1 within 10 s; " << context());
  // Both launchers saw it; slurmstepd had signalled the workers too (every process of the
  // step), so the launchers recorded it without sending it again: each worker got it once.
  int seen = 0;
  for (const auto& e : muster::store::run_reader(dir).events())
    seen += e.kind == "signal_forwarded" &&
            e.message.find("SIGUSR1 delivered to every worker by its sender") != std::string::npos;
  CHECK(seen == 2);
  std::this_thread::sleep_for(300ms);  // a second delivery would show by now
  for (int rank = 0; rank < 4; ++rank) {
    const auto log = muster::test::read_file(rank_log(dir, rank));
    std::size_t got = 0;
    for (auto at = log.find("got SIGUSR1"); at != std::string::npos;
         at = log.find("got SIGUSR1", at + 1))
      ++got;
    CHECK(got == 1);
  }

  REQUIRE(cluster.command({"scancel", job}).exit_code == 0);
  auto ended = srun.wait(15s);  // KillWait is 5 s; the launchers stop at SIGTERM
  if (!ended) FAIL("srun still runs 15 s after scancel; " << context());
  CHECK(ended->exit_code != 0);
}

TEST_CASE(
    "sbatch --requeue: after SIGUSR1 node 0 requeues the job, which resumes in its run "
    "directory",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  muster::test::slurm_cluster_options options;
  options.cred_expire_s = 5;  // a requeued job may start again 6 s later (see below)
  slurm_cluster cluster(options);
  muster::test::temp_dir runs("muster-runs");
  const auto job_id = cluster.first_job_id();
  const auto job = std::to_string(job_id);
  const auto dir = run_dir_of(runs.path(), job_id);
  // The batch script is fixed text; only our own paths go into it, single-quoted.
  for (const auto& path : {runs.path().string(), kMuster, kWorker})
    REQUIRE(path.find('\'') == std::string::npos);
  const auto script = cluster.dir() / "job.sh";
  muster::test::write_file(
      script,
      "#!/bin/bash\n"
      "# The first start runs until it is stopped; the start after the requeue ends at once.\n"
      "if [ -z \"$SLURM_RESTART_COUNT\" ]; then sleep_ms=60000; else sleep_ms=100; fi\n"
      "srun --ntasks-per-node=1 '" +
          kMuster + "' launch 'launch.runs_dir=" + runs.path().string() +
          "' launch.master_addr=127.0.0.1 launch.nproc=2 launch.requeue_on_signal=true -- '" +
          kWorker + "' --sleep-ms \"$sleep_ms\"\n");
  const auto batch_log = runs.path() / ("slurm-" + job + ".out");
  auto context = [&] {
    std::string batch;
    try {
      batch = muster::test::read_file(batch_log);
    } catch (const std::exception&) {
    }
    const auto fields = cluster.job_fields(job_id);
    auto field = [&](const char* name) {
      auto it = fields.find(name);
      return it == fields.end() ? std::string("?") : it->second;
    };
    return "job " + job + ": JobState=" + field("JobState") + " Reason=" + field("Reason") +
           " Restarts=" + field("Restarts") + "\nbatch output:\n" + batch + cluster.log_tail();
  };
  auto submitted =
      cluster.command({"sbatch", "--parsable", "--requeue", "-N2", "--ntasks-per-node=1", "-o",
                       batch_log.string(), script.string()});
  INFO("sbatch: " << submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  REQUIRE(std::stoul(submitted.out) == job_id);
  if (!wait_for([&] { return every_rank([&](int r) { return rank_started(dir, r); }); }, 20s))
    FAIL("the 4 ranks did not start within 20 s; " << context());
  REQUIRE(cluster.command({"scancel", "-s", "USR1", job}).exit_code == 0);
  if (!wait_for([&] { return every_rank([&](int r) { return rank_got_usr1(dir, r); }); }, 10s))
    FAIL("not every worker got SIGUSR1 within 10 s; " << context());
  // The test worker goes on after SIGUSR1 (a real one would checkpoint and exit): stop the
  // step's tasks with SIGTERM (scancel without --batch leaves the batch shell alone). Node 0's
  // launcher, asked for a requeue by the SIGUSR1, runs `scontrol requeue` once they ended.
  REQUIRE(cluster.command({"scancel", "-s", "TERM", job}).exit_code == 0);
  auto requeued = [&] {
    auto fields = cluster.job_fields(job_id);
    return fields["JobState"] == "PENDING" && fields["Restarts"] == "1";
  };
  if (!wait_for(requeued, 20s)) FAIL("the job was not requeued within 20 s; " << context());
  // a launcher the SIGTERM reached says its own stop (node 1's may reach it only after node 0's
  // stop did, which it then says: slurmstepd signals each node at its own moment); no rank is
  // said to have failed
  CHECK_THAT(muster::test::read_file(batch_log),
             Catch::Contains("muster: stopped by SIGTERM") && !Catch::Contains("failed first"));
  // status says what Slurm did, where the store says only that the run was cancelled
  const auto pending =
      muster::test::run_process({kMuster, "status", dir.string()}, launch_env(cluster));
  CHECK_THAT(pending.out, Catch::Contains("\nslurm     job " + job +
                                          " is PENDING: requeued, it "
                                          "starts again in this run directory (the program "
                                          "goes on from what it saved)"));
  // A requeued job is held back until its BeginTime, cred_expire + 1 s after the requeue
  // (121 s by default; Reason=BeginTime), so that it never starts while the nodes still hold
  // its revoked credential. `scontrol update JobId=<id> StartTime=now` makes it eligible at
  // once, but a start within the second of the requeue then fails on the nodes ("Job <id>
  // already killed, do not launch batch job"; the job ends FAILED), in about one run of five
  // here. So this cluster has cred_expire=5, Slurm's least, and the job starts after 6-7 s.
  std::string state;
  auto ended = [&] {
    state = cluster.job_field(job_id, "JobState");
    return slurm_cluster::finished(state);
  };
  if (!wait_for(ended, 30s)) FAIL("the requeued job did not end within 30 s; " << context());
  INFO(context());
  CHECK(state == "COMPLETED");
  CHECK(cluster.job_fields(job_id)["Restarts"] == "1");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(runs.path()))
    if (e.is_directory()) dirs.push_back(e.path());
  CHECK(dirs == std::vector<fs::path>{dir});  // both starts in one run directory
  const auto events = muster::store::run_reader(dir).events();
  // node 0 requeues; the host named is the one whose launcher forwarded the signal first
  CHECK(has_event(node_events(dir, "gpu-a01"), "requeue",
                  "requeued job " + job + " after SIGUSR1, seen first on gpu-a0"));
  CHECK(has_event(node_events(dir, "gpu-a01"), "requeue", "(scontrol requeue: ok)"));
  int resumed = 0;
  for (const auto& e : events)
    resumed += e.kind == "resumed" && e.message.find("SLURM_RESTART_COUNT=1") != std::string::npos;
  CHECK(resumed == 2);  // one per node
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    auto lines = contract_lines(muster::test::read_file(rank_log(dir, rank)));
    REQUIRE(lines.size() == 2);  // the first start, then the one after the requeue
    CHECK(lines[0].restart == 0);
    CHECK(lines[1].restart == 1);
    CHECK(lines[1].rank == rank);
  }
}

TEST_CASE("muster status lists the user's Slurm jobs beside the runs, each with its run",
          "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir runs("muster-runs");
  const auto job_id = cluster.first_job_id();
  const auto dir = run_dir_of(runs.path(), job_id);
  // a batch job whose step runs muster launch (so a run records the job), and a plain one
  std::string step;
  for (const auto& word : srun_launch({"-N1", "--ntasks-per-node=1"}, runs.path(),
                                      {"launch.nproc=1"}, {"--sleep-ms", "60000"}))
    step += (step.empty() ? "" : " ") + word;
  REQUIRE(cluster
              .command({"sbatch", "--parsable", "-N1", "-J", "muster-step", "-o", "/dev/null",
                        "--wrap", step})
              .exit_code == 0);
  REQUIRE(cluster
              .command({"sbatch", "--parsable", "-N1", "-J", "plain sleep", "-o", "/dev/null",
                        "--wrap", "sleep 60"})
              .exit_code == 0);
  if (!wait_for([&] { return rank_started(dir, 0); }, 20s))
    FAIL("the batch job's rank did not start within 20 s\n" << cluster.log_tail());

  auto env = launch_env(cluster);
  const auto text =
      muster::test::run_process({kMuster, "status", "--runs-dir", runs.path().string()}, env);
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("Slurm jobs of yours (squeue --me):"));
  const auto line_of = [&](std::uint32_t id) {
    const auto at = text.out.find("\n" + std::to_string(id) + " ");
    return at == std::string::npos ? std::string()
                                   : text.out.substr(at + 1, text.out.find('\n', at + 1) - at - 1);
  };
  CHECK_THAT(line_of(job_id), Catch::Contains("RUNNING") && Catch::Contains("muster-step") &&
                                  Catch::EndsWith(dir.filename().string()));
  CHECK_THAT(line_of(job_id + 1), Catch::Contains("plain sleep"));

  const auto as_json = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), "--json"}, env);
  const auto doc = nlohmann::json::parse(as_json.out);
  REQUIRE(doc["slurm_jobs"].size() == 2);
  CHECK(doc["slurm_jobs"][0]["id"] == std::to_string(job_id));
  CHECK(doc["slurm_jobs"][0]["run"] == dir.filename().string());
  CHECK(doc["slurm_jobs"][1]["run"].is_null());

  // a job of no run (pending, or one that runs no muster launch) by its id: what squeue says
  const auto plain = std::to_string(job_id + 1);
  const auto one = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), plain}, env);
  INFO(one.out << one.err);
  CHECK(one.exit_code == 0);
  CHECK_THAT(one.out, Catch::StartsWith("Slurm job " + plain + " (plain sleep) is RUNNING ") &&
                          Catch::Contains(": no run of it in " + runs.path().string()));
  const auto one_json = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), plain, "--json"}, env);
  const auto job_doc = nlohmann::json::parse(one_json.out);
  CHECK(job_doc["run"].is_null());
  CHECK(job_doc["slurm_job"]["state"] == "RUNNING");
  // diagnose of it: nothing to diagnose yet, saying what Slurm says
  const auto early = muster::test::run_process(
      {kMuster, "diagnose", "--runs-dir", runs.path().string(), plain}, env);
  CHECK(early.exit_code == 0);
  CHECK_THAT(early.out, Catch::StartsWith("nothing to diagnose yet: Slurm job " + plain +
                                          " (plain sleep) is RUNNING "));
  // an id squeue does not have (any more) is refused, saying why it has no run and where to look
  const auto none = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), "999999"}, env);
  CHECK(none.exit_code == 2);
  CHECK_THAT(
      none.err,
      Catch::Contains("999999: no run directory for Slurm job 999999 in " + runs.path().string() +
                      ", and squeue --me no longer has it: its launchers never started") &&
          Catch::Contains("prolog failed: sinfo -R names the node it drained") &&
          Catch::Contains("sacct -j 999999 gives the job's state"));
  const auto never = muster::test::run_process(
      {kMuster, "diagnose", "--runs-dir", runs.path().string(), "999999"}, env);
  CHECK(never.exit_code == 2);
  CHECK_THAT(never.err,
             Catch::Contains("squeue --me no longer has it: its launchers never started"));
  // one whose launchers did not meet has a run directory, without a store: that is said instead
  fs::create_directories(runs / "gone-999998");
  muster::test::write_file(runs / "gone-999998" / "slurm.out", "muster: rendezvous: ...\n");
  const auto storeless = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), "999998"}, env);
  CHECK(storeless.exit_code == 2);
  CHECK_THAT(storeless.err, Catch::Contains("holds no run store (node-*.db): its launchers "
                                            "stopped before any rank started") &&
                                !Catch::Contains("never started"));

  // a controller that does not answer: one line that says so, the runs still listed
  env.set["SLURM_CONF"] = (runs / "missing.conf").string();
  const auto broken =
      muster::test::run_process({kMuster, "status", "--runs-dir", runs.path().string()}, env);
  CHECK(broken.exit_code == 0);
  CHECK_THAT(broken.out, Catch::Contains(dir.filename().string()) &&
                             Catch::Contains("Slurm: squeue --me failed: "));
  cluster.command({"scancel", std::to_string(job_id), std::to_string(job_id + 1)});
}

TEST_CASE(
    "muster-sbatch submits a two-node job that runs to its end, Slurm's output in the run "
    "directory",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir dir("muster-sbatch");
  const std::string sbatch = std::string(MUSTER_BIN_DIR) + "/muster-sbatch";
  const auto job = dir / "job.toml";
  muster::test::write_file(job, "[job]\nname = \"sb\"\n[slurm]\nnodes = 2\ntime = \"10:00\"\n");
  const auto runs = dir / "runs";
  const std::vector<std::string> args = {sbatch,
                                         job.string(),
                                         "launch.runs_dir=" + runs.string(),
                                         "launch.master_addr=127.0.0.1",
                                         "launch.nproc=2",
                                         "--",
                                         kWorker,
                                         "--sleep-ms",
                                         "300"};
  // --dry-run shows the script and submits nothing
  auto dry = args;
  dry.insert(dry.begin() + 2, "--dry-run");
  const auto shown = muster::test::run_process(dry, launch_env(cluster));
  REQUIRE(shown.exit_code == 0);
  CHECK_THAT(shown.out, Catch::StartsWith("#!/bin/bash\n") &&
                            Catch::Contains("#SBATCH --nodes=2\n") &&
                            Catch::Contains("#SBATCH --time=10:00\n") &&
                            Catch::Contains("# --dry-run: nothing written, nothing submitted.") &&
                            Catch::Contains(" and runs: 'sbatch' '--parsable'"));
  CHECK_FALSE(fs::exists(runs));

  const auto submitted = muster::test::run_process(args, launch_env(cluster));
  INFO("muster-sbatch: " << submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const auto job_id = static_cast<std::uint32_t>(std::stoul(submitted.out));
  CHECK_THAT(submitted.err, Catch::Contains("follow it with: muster status --runs-dir " +
                                            runs.string() + " " + std::to_string(job_id)));
  const auto state = [&] { return cluster.job_field(job_id, "JobState"); };
  if (!wait_for([&] { return slurm_cluster::finished(state()); }, 30s))
    FAIL("the job did not end within 30 s: " << state() << "\n" << cluster.log_tail());
  CHECK(state() == "COMPLETED");
  const auto run_dir = runs / ("sb-" + std::to_string(job_id));
  CHECK(fs::exists(run_dir / "node-gpu-a01.db"));
  CHECK(fs::exists(run_dir / "node-gpu-a02.db"));
  muster::store::run_reader reader(run_dir);
  REQUIRE(reader.ranks().size() == 4);
  for (const auto& rank : reader.ranks()) CHECK(rank.state == muster::store::rank_state::succeeded);
  // the limit Slurm held, recorded once by node 0 for diagnose's advice
  CHECK(has_event(reader.events(), "time_limit", "Slurm's time limit of this job: 10:00 (squeue)"));
  // Slurm's output, linked into the run directory, which diagnose reads
  CHECK(fs::is_symlink(run_dir / "slurm.out"));
  CHECK(fs::equivalent(run_dir / "slurm.out", runs / ("slurm-" + std::to_string(job_id) + ".out")));
  CHECK(fs::exists(runs / "sbatch"));
  const auto diagnosed = muster::test::run_process({kMuster, "diagnose", run_dir.string()});
  CHECK(diagnosed.exit_code == 0);

  // bad input: no job file, a bad key
  CHECK(muster::test::run_process({sbatch}, launch_env(cluster)).exit_code == 2);
  const auto bad =
      muster::test::run_process({sbatch, job.string(), "slurm.nodes=0"}, launch_env(cluster));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("slurm.nodes"));
}

TEST_CASE(
    "a job killed with its launchers records no end: status and diagnose take Slurm's word that "
    "it is over",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir dir("muster-killed");
  const auto job = dir / "job.toml";
  muster::test::write_file(job, "[job]\nname = \"k\"\n[slurm]\nnodes = 2\ntime = \"10:00\"\n");
  const auto runs = dir / "runs";
  const auto submitted =
      muster::test::run_process({std::string(MUSTER_BIN_DIR) + "/muster-sbatch", job.string(),
                                 "launch.runs_dir=" + runs.string(), "launch.master_addr=127.0.0.1",
                                 "launch.nproc=1", "--", kWorker, "--sleep-ms", "60000"},
                                launch_env(cluster));
  INFO("muster-sbatch: " << submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const auto job_id = std::to_string(std::stoul(submitted.out));
  const auto run_dir = runs / ("k-" + job_id);
  const auto running = [&] {
    try {
      const auto ranks = muster::store::run_reader(run_dir).ranks();
      return ranks.size() == 2 && std::all_of(ranks.begin(), ranks.end(), [](const auto& r) {
               return r.state == muster::store::rank_state::running;
             });
    } catch (const std::exception&) {
      return false;  // not written yet
    }
  };
  if (!wait_for(running, 30s)) FAIL("the ranks did not start within 30 s\n" << cluster.log_tail());
  // SIGKILL to each node's launcher (the ranks' parent; the ranks die with it): nobody records
  // an end, and the job fails (the batch shell's srun returns)
  std::vector<pid_t> launchers;
  for (const auto& rank : muster::store::run_reader(run_dir).ranks()) {
    REQUIRE(rank.pid);
    std::istringstream stat(
        muster::test::read_file("/proc/" + std::to_string(*rank.pid) + "/stat"));
    std::string pid, comm, state;
    pid_t launcher = 0;
    stat >> pid >> comm >> state >> launcher;  // comm is "(muster-test-wor)": no spaces
    REQUIRE(launcher > 1);
    launchers.push_back(launcher);
  }
  // stopped first, so srun's SIGTERM to the other after the first one's death (kill-on-bad-exit)
  // stays pending until the SIGKILL: a loaded machine let the other record its end
  for (const pid_t launcher : launchers) ::kill(launcher, SIGSTOP);
  for (const pid_t launcher : launchers) ::kill(launcher, SIGKILL);
  const auto state = [&] { return cluster.job_field(std::stoul(job_id), "JobState"); };
  if (!wait_for([&] { return slurm_cluster::finished(state()); }, 30s))
    FAIL("the job did not end within 30 s: " << state() << "\n" << cluster.log_tail());
  const auto recorded = muster::store::run_reader(run_dir).run();
  CHECK(recorded->state == muster::store::run_state::running);
  // status asks this cluster (squeue --clusters, which fails without slurmdbd here, so the plain
  // squeue answers)
  CHECK(recorded->slurm_cluster == "mustertest");

  auto env = launch_env(cluster);
  const auto status =
      muster::test::run_process({kMuster, "status", "--runs-dir", runs.string(), job_id}, env);
  INFO("status: " << status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("lost      the store says running, but Slurm says job " +
                                         job_id + " is over (" + state() + ")"));
  CHECK_THAT(status.out, Catch::Contains("<- process gone"));
  const auto diagnosed = muster::test::run_process(
      {kMuster, "diagnose", "--runs-dir", runs.string(), job_id, "--json"}, env);
  INFO("diagnose: " << diagnosed.out << diagnosed.err);
  CHECK(diagnosed.exit_code == 1);
  const auto root = nlohmann::json::parse(diagnosed.out)["findings"].at(0);
  CHECK(root["category"] == "worker_killed_sigkill");
  CHECK(root["ranks"] == nlohmann::json::array({0, 1}));
  CHECK_THAT(root["summary"].get<std::string>(),
             Catch::Contains("died with the run's launcher: the run store says running, but "
                             "Slurm says job " +
                             job_id));
}

TEST_CASE(
    "muster-sbatch --array names its task runs, which muster status lists by the array's job id",
    "[slurm]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  slurm_cluster cluster;
  muster::test::temp_dir dir("muster-sbatch-array");
  const auto job = dir / "job.toml";
  muster::test::write_file(job, "[job]\nname = \"arr\"\n[slurm]\ntime = \"10:00\"\n");
  const auto runs = dir / "runs";
  const auto env = launch_env(cluster);
  const auto submitted = muster::test::run_process(
      {std::string(MUSTER_BIN_DIR) + "/muster-sbatch", job.string(), "--array=0-1",
       "launch.runs_dir=" + runs.string(), "launch.master_addr=127.0.0.1", "launch.nproc=1", "--",
       kWorker, "--sleep-ms", "300"},
      env);
  INFO("muster-sbatch: " << submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const auto id = submitted.out.substr(0, submitted.out.find('\n'));
  CHECK_THAT(submitted.err,
             Catch::Contains("submitted array job " + id) &&
                 Catch::Contains("run directories " + runs.string() + "/arr-" + id +
                                 "_<task id>, each task's Slurm output " + runs.string() +
                                 "/slurm-<the task's own job id>.out") &&
                 Catch::Contains("follow them with: muster status --runs-dir " + runs.string() +
                                 " " + id));
  const std::vector<fs::path> tasks = {runs / ("arr-" + id + "_0"), runs / ("arr-" + id + "_1")};
  const auto ended = [&](const fs::path& run) {
    try {
      const auto ranks = muster::store::run_reader(run).ranks();
      return ranks.size() == 1 && ranks[0].state == muster::store::rank_state::succeeded;
    } catch (const std::exception&) {
      return false;  // no store yet
    }
  };
  if (!wait_for([&] { return ended(tasks[0]) && ended(tasks[1]); }, 40s))
    FAIL("the array's two tasks did not end within 40 s\n" << cluster.log_tail());

  const auto status =
      muster::test::run_process({kMuster, "status", "--runs-dir", runs.string(), id}, env);
  INFO("muster status: " << status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out,
             Catch::StartsWith("Slurm array job " + id + ": 2 task runs in " + runs.string()) &&
                 Catch::Contains("\narr-" + id + "_0 ") && Catch::Contains("\narr-" + id + "_1 "));
  // one task by its own id, as before
  const auto one =
      muster::test::run_process({kMuster, "status", "--runs-dir", runs.string(), id + "_1"}, env);
  CHECK(one.exit_code == 0);
  CHECK_THAT(one.out, Catch::StartsWith("run       arr-" + id + "_1 "));
  // and by the task's own job id (SLURM_JOB_ID), which names its Slurm output file; Slurm gives
  // the array's own id to one task, and that id keeps naming the array
  int by_own_ids = 0;
  for (int t = 0; t < 2; ++t) {
    const auto task = muster::store::run_reader(tasks[t]).run();
    REQUIRE(task->slurm_task_job_id);
    const std::string own_id = *task->slurm_task_job_id;
    CHECK(fs::exists(runs / ("slurm-" + own_id + ".out")));
    if (own_id == id) continue;
    const auto by_own =
        muster::test::run_process({kMuster, "status", "--runs-dir", runs.string(), own_id}, env);
    INFO("muster status " << own_id << ": " << by_own.out << by_own.err);
    CHECK(by_own.exit_code == 0);
    CHECK_THAT(by_own.out,
               Catch::StartsWith("run       arr-" + id + "_" + std::to_string(t) + " "));
    ++by_own_ids;
  }
  CHECK(by_own_ids >= 1);
  // diagnose reads one run: it asks which
  const auto diagnosed =
      muster::test::run_process({kMuster, "diagnose", "--runs-dir", runs.string(), id}, env);
  CHECK(diagnosed.exit_code == 2);
  CHECK_THAT(diagnosed.err,
             Catch::Contains(id + ": Slurm array job " + id + " has 2 task runs in " +
                             runs.string() + ": arr-" + id + "_0, arr-" + id +
                             "_1; give one as <array job id>_<task id> (" + id + "_0)"));
}

// muster diagnose on runs the launcher made, with failures injected into real workers: a rank
// that dies with an OOM-shaped error (the others then killed by the launcher), a clean run,
// and Slurm's output given with --log.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "tests/support/launch_output.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using nlohmann::json;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kWorker = std::string(MUSTER_BIN_DIR) + "/muster-test-worker";

const std::string kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 2.10 GiB is free. Of the allocated memory 70.00 GiB is "
    "allocated by PyTorch, and 3.00 GiB is reserved by PyTorch but unallocated.";

}  // namespace

TEST_CASE("muster diagnose finds the rank that ran out of memory in a launched run", "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  const auto run = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "launch.nproc=3", "--", kWorker,
       "--sleep-ms", "30000", "--only-rank", "2", "--after-ms", "200", "--exit-code", "1",
       "--stderr-line", kOom});
  REQUIRE(run.exit_code == 1);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto text = muster::test::run_process({kMuster, "diagnose", dir.string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::StartsWith("ROOT  [cuda_oom] CUDA out of memory on rank 2 on "));
  CHECK_THAT(text.out, Catch::Contains(" (GPU 0): tried to allocate 4.00 GiB of 79.15 GiB, 2.10 "
                                       "GiB free\n"));
  CHECK_THAT(text.out, Catch::Contains((dir / "logs" / "rank-2.log").string() + ":"));
  CHECK_THAT(text.out, Catch::Contains("fix 1: with packing, lower train.max_tokens_per_pack"));

  const auto as_json = muster::test::run_process({kMuster, "diagnose", dir.string(), "--json"});
  CHECK(as_json.exit_code == 1);
  const auto d = json::parse(as_json.out);
  CHECK(d["failed"] == true);
  CHECK(d["findings"][0]["category"] == "cuda_oom");
  CHECK(d["findings"][0]["ranks"] == json::array({2}));
  CHECK(d["findings"][0]["facts"]["reserved_unallocated"] == "3.00 GiB");
}

TEST_CASE("a run launch.max_restarts brought to its end is no failure, and says what failed",
          "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  // rank 1 fails in the first attempt only
  const auto run = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "launch.nproc=2",
       "launch.max_restarts=1", "launch.tee=none", "--", "/bin/sh", "-c",
       "[ \"$RANK$TORCHELASTIC_RESTART_COUNT\" = 10 ] && exit 7; exit 0"});
  REQUIRE(run.exit_code == 0);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto text = muster::test::run_process({kMuster, "diagnose", dir.string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::StartsWith("the run succeeded after 1 restart(s); what failed "
                                         "before:\nROOT  [worker_failed_see_error_file] rank 1"));
  const auto as_json = muster::test::run_process({kMuster, "diagnose", dir.string(), "--json"});
  CHECK(as_json.exit_code == 0);
  const auto d = json::parse(as_json.out);
  CHECK(d["recovered"] == true);
  CHECK(d["findings"][0]["ranks"] == json::array({1}));
}

TEST_CASE("muster diagnose says so when a run has no failure, and reads extra logs", "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  REQUIRE(muster::test::run_process({kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                     "launch.nproc=2", "--", kWorker, "--lines", "3"})
              .exit_code == 0);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto clean = muster::test::run_process({kMuster, "diagnose", dir.string()});
  CHECK(clean.exit_code == 0);
  CHECK_THAT(clean.out, Catch::StartsWith("no failure found in "));

  muster::test::write_file(runs / "slurm-4242.out",
                           "step 100 loss 2.1\n"
                           "slurmstepd: error: *** JOB 4242 ON gpu-a07 CANCELLED AT "
                           "2026-11-22T03:00:01 DUE TO TIME LIMIT ***\n");
  const auto limit = muster::test::run_process(
      {kMuster, "diagnose", dir.string(), "--log", (runs / "slurm-4242.out").string()});
  CHECK(limit.exit_code == 1);
  CHECK_THAT(limit.out, Catch::Contains("ROOT  [slurm_time_limit] Slurm cancelled job 4242"));
  CHECK_THAT(limit.out, Catch::Contains("slurm-4242.out:2: slurmstepd"));
  CHECK_THAT(limit.out, Catch::Contains("--signal=B:USR1@300 and"));  // no limit known: 300 s
  // the limit Slurm held, as the launcher recorded it at the start: a lead within it
  muster::store::node_writer(muster::store::run_paths(dir).node_dbs().front())
      .add_event({muster::store::now_ms(), std::nullopt, muster::store::severity::info,
                  "time_limit", "Slurm's time limit of this job: 2:00 (squeue)"});
  const auto within = muster::test::run_process(
      {kMuster, "diagnose", dir.string(), "--log", (runs / "slurm-4242.out").string()});
  CHECK_THAT(within.out, Catch::Contains("--signal=B:USR1@30 and"));

  const auto bad = muster::test::run_process({kMuster, "diagnose", "--log", "/nonexistent.log"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("/nonexistent.log"));
  // no run named: the newest of --runs-dir, said on stderr; none there: exit 2, naming it
  const auto newest =
      muster::test::run_process({kMuster, "diagnose", "--runs-dir", runs.path().string()});
  CHECK(newest.exit_code == 0);
  CHECK_THAT(newest.out, Catch::StartsWith("no failure found in "));
  CHECK_THAT(newest.err, Catch::Contains("diagnosing the newest run under " + runs.path().string() +
                                         ": " + dir.filename().string()));
  const auto none = muster::test::run_process(
      {kMuster, "diagnose", "--runs-dir", (runs / "nothing-here").string()});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("no runs under " + (runs / "nothing-here").string()));
  // and status's list says where it looked
  const auto listed = muster::test::run_process(
      {kMuster, "status", "--runs-dir", (runs / "nothing-here").string()}, {{}, {"SLURM_JOB_ID"}});
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.out, Catch::StartsWith("no runs in " + (runs / "nothing-here").string() +
                                           " (runs elsewhere: --runs-dir DIR or MUSTER_RUNS_DIR"));
}

TEST_CASE("muster diagnose finds the hung rank of a launched run, by run id, with its steps",
          "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  const auto run = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "launch.nproc=3",
       "launch.timeout_hang=1", "launch.kill_grace=2", "--", kWorker, "--heartbeat-ms", "50",
       "--steps", "1000", "--sleep-ms", "60000", "--only-rank", "1", "--hang-after-ms", "300"});
  REQUIRE(run.exit_code != 0);
  const auto dir = muster::test::only_run_dir(runs.path());
  // by run id under --runs-dir, as muster status takes it
  const auto text = muster::test::run_process(
      {kMuster, "diagnose", "--runs-dir", runs.path().string(), dir.filename().string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::StartsWith("ROOT  [hang_watchdog_stuck] rank 1 on "));
  CHECK_THAT(text.out, Catch::Contains("muster's hang detection"));
  // the node file of the hung rank's host, not the directory's pattern
  CHECK_THAT(text.out, Catch::Contains(".db (events):") && Catch::Contains(": rank 1 is hung") &&
                           !Catch::Contains("node-*.db"));
  CHECK_THAT(text.out, Catch::Contains("fix 2: raise launch.timeout_hang"));
  CHECK_THAT(text.out, Catch::Contains("ranks: median step time "));

  const auto as_json = muster::test::run_process({kMuster, "diagnose", dir.string(), "--json"});
  const auto d = json::parse(as_json.out);
  CHECK(d["findings"][0]["category"] == "hang_watchdog_stuck");
  CHECK(d["findings"][0]["root"] == true);
  CHECK(d["findings"][0]["ranks"] == json::array({1}));
  // every rank reported steps; the hung one stopped early, the others ran on
  REQUIRE(d["ranks"]["ranks"].size() == 3);
  CHECK(d["ranks"]["ranks"][1]["steps"].get<int>() < d["ranks"]["ranks"][0]["steps"].get<int>());
  CHECK(d["ranks"]["median_step_s"].get<double>() > 0);
}

TEST_CASE(
    "a hung Python rank dumps its stack on the hang's SIGABRT, and diagnose says where it stood",
    "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  // a heartbeat, then a call that never returns (as a collective a peer never joins)
  const std::string script =
      "import os, time\n"
      "def wait_for_peer():\n"
      "    time.sleep(60)\n"
      "open(os.environ['MUSTER_HEARTBEAT_FILE'], 'w').close()\n"
      "wait_for_peer()\n";
  const auto run =
      muster::test::run_process({kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                 "launch.nproc=1", "launch.timeout_hang=1", "launch.kill_grace=2",
                                 "launch.tee=none", "--", "/usr/bin/python3", "-c", script},
                                {{}, {"PYTHONFAULTHANDLER"}});
  REQUIRE(run.exit_code != 0);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto log = muster::test::read_file(dir / "logs" / "rank-0.log");
  CHECK_THAT(log, Catch::Contains("Fatal Python error: Aborted"));
  const auto text = muster::test::run_process({kMuster, "diagnose", dir.string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::Contains("; rank 0 stood at File \"<string>\", line 3 in "
                                       "wait_for_peer"));
}

TEST_CASE("muster diagnose finds a rank killed with SIGKILL and says there is no OOM evidence",
          "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  const auto run = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "launch.nproc=2", "--", kWorker,
       "--sleep-ms", "30000", "--only-rank", "1", "--after-ms", "200", "--signal", "9"});
  REQUIRE(run.exit_code == 128 + 9);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto text = muster::test::run_process({kMuster, "diagnose", dir.string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::StartsWith("ROOT  [worker_killed_sigkill] rank 1 on "));
  CHECK_THAT(text.out, Catch::Contains("no evidence of an OOM kill"));
  CHECK_THAT(text.out, Catch::Contains("ended by signal 9"));
  CHECK_THAT(text.out, Catch::Contains("dmesg -T"));
  // with the node's kernel log beside it, the OOM killer is the root
  muster::test::write_file(runs / "dmesg.txt",
                           "[Sun Nov 22 03:12:44 2026] Out of memory: Killed process 4242 "
                           "(muster-test-wor) total-vm:1024kB, anon-rss:512kB\n");
  const auto with_dmesg = muster::test::run_process(
      {kMuster, "diagnose", dir.string(), "--log", (runs / "dmesg.txt").string()});
  CHECK_THAT(with_dmesg.out, Catch::StartsWith("ROOT  [host_oom_kill]"));
  CHECK_THAT(with_dmesg.out, Catch::Contains("then  [worker_killed_sigkill]"));
}

TEST_CASE("a rank that exits without a traceback or an error file: diagnose quotes its last output",
          "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  const auto run = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "launch.nproc=2",
       "launch.tee=none", "--", kWorker, "--sleep-ms", "30000", "--only-rank", "1", "--after-ms",
       "200", "--lines", "3", "--exit-code", "3"});
  REQUIRE(run.exit_code == 3);
  const auto text = muster::test::run_process(
      {kMuster, "diagnose", muster::test::only_run_dir(runs.path()).string()});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::Contains("rank 1 on ") && Catch::Contains("exit code 3") &&
                           Catch::Contains("no error file and no Python traceback; its last "
                                           "output: ") &&
                           Catch::Contains("(the rest in logs/rank-1.log of its run directory)"));
}

TEST_CASE("muster diagnose of a run still going names a rank whose process is stopped",
          "[diagnose]") {
  muster::test::temp_dir runs("diagnose-runs");
  const auto now = muster::store::now_ms();
  // rank 1, held stopped (SIGSTOP, a debugger) while its run goes on
  const muster::test::stopped_child child;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const std::string host = std::string(name).substr(0, std::string(name).find('.'));
  muster::store::run_paths paths(runs.path(), "job-20261128-120000-abcd");
  paths.create();
  {
    muster::store::node_writer db(paths.node_db(host));
    db.put_run({paths.run_id(), "job", muster::store::run_state::running, now - 60000, now, 2, 1,
                std::nullopt, paths.job_config().string(), "", std::nullopt, std::nullopt});
    db.put_rank({1, host, 1, std::int64_t{child.pid()}, muster::store::rank_state::running,
                 std::nullopt, std::nullopt, now});
  }
  const auto r = muster::test::run_process({kMuster, "diagnose", paths.dir().string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("note: rank 1's process is stopped (SIGSTOP or a debugger "
                                    "holds it): the other ranks wait on it") &&
                        Catch::Contains("note: the run is still running"));
}

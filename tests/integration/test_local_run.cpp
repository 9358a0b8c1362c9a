// `muster run` with real worker processes (muster-test-worker): N ranks start with torchrun's
// environment; a failing rank stops the others fast and its exit code becomes muster's; a rank
// killed by a signal is recorded as such; a launcher killed with SIGKILL leaves no worker; SIGUSR1
// reaches every worker; SIGTERM stops them; a worker that ignores SIGTERM is killed after the
// grace. Everything is checked in the run store as well.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/run_reader.hpp"
#include "tests/support/launch_output.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kWorker = std::string(MUSTER_BIN_DIR) + "/muster-test-worker";

std::vector<std::string> run_args(const muster::test::temp_dir& runs, int nproc,
                                  std::vector<std::string> worker_args,
                                  std::vector<std::string> overrides = {}) {
  std::vector<std::string> args = {kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                   "launch.nproc=" + std::to_string(nproc)};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.push_back("--");
  args.push_back(kWorker);
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  return args;
}

// Waits until `done` holds, or fails the test after `limit`.
template <class F>
void wait_for(F&& done, std::chrono::milliseconds limit, const char* what) {
  auto end = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > end) FAIL("timed out waiting for " << what);
    std::this_thread::sleep_for(10ms);
  }
}

// The pids of the ranks once all `n` are recorded as running.
std::vector<pid_t> running_pids(const muster::test::temp_dir& runs, int n) {
  std::vector<pid_t> pids;
  wait_for(
      [&] {
        pids.clear();
        if (!fs::exists(runs.path()) || fs::is_empty(runs.path())) return false;
        try {
          muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
          for (const auto& r : reader.ranks())
            if (r.state == muster::store::rank_state::running && r.pid)
              pids.push_back(static_cast<pid_t>(*r.pid));
        } catch (const std::exception&) {
          return false;
        }
        return static_cast<int>(pids.size()) == n;
      },
      5s, "every rank to be recorded as running");
  return pids;
}

// A worker handles SIGUSR1 once it runs its main(): waits for each rank's first line.
void wait_for_first_lines(const fs::path& dir, int n) {
  wait_for(
      [&] {
        for (int rank = 0; rank < n; ++rank) {
          auto log = dir / "logs" / ("rank-" + std::to_string(rank) + ".log");
          if (!fs::exists(log) || fs::file_size(log) == 0) return false;
        }
        return true;
      },
      5s, "every worker to start");
}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close == std::string::npos || text.substr(close + 2, 1) == "Z";  // a zombie is dead
}

}  // namespace

TEST_CASE("muster run starts N ranks with torchrun's environment and records them", "[local_run]") {
  muster::test::temp_dir runs;
  auto r = muster::test::run_process(run_args(runs, 4, {"--lines", "2"}, {"launch.tee=all"}));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  auto dir = muster::test::only_run_dir(runs.path());
  const std::string run_id = dir.filename().string();
  // the last line names the run, for muster status and diagnose
  CHECK_THAT(r.err, Catch::Contains("muster: run " + run_id +
                                    ": the 4 rank(s) of this node succeeded; logs in "));
  for (int rank = 0; rank < 4; ++rank) {
    auto log = muster::test::read_file(dir / "logs" / ("rank-" + std::to_string(rank) + ".log"));
    CHECK_THAT(log, Catch::StartsWith("rank " + std::to_string(rank) + " of 4 (local " +
                                      std::to_string(rank) + " of 4, node 0) master 127.0.0.1:"));
    CHECK_THAT(log, Catch::Contains(" run " + run_id));
    CHECK_THAT(r.out, Catch::Contains("[rank " + std::to_string(rank) + "] rank " +
                                      std::to_string(rank) + " line 1"));
  }
  muster::store::run_reader reader(dir);
  REQUIRE(reader.run());
  CHECK(reader.run()->state == muster::store::run_state::succeeded);
  CHECK(reader.run()->world_size == 4);
  auto ranks = reader.ranks();
  REQUIRE(ranks.size() == 4);
  for (const auto& rank : ranks) {
    CHECK(rank.state == muster::store::rank_state::succeeded);
    CHECK(rank.exit_code == 0);
  }
  CHECK(fs::exists(dir / "job.toml"));
}

TEST_CASE("muster status of an array job's id lists its task runs, also while only one has one",
          "[local_run]") {
  muster::test::temp_dir runs;
  REQUIRE(muster::test::run_process(run_args(runs, 1, {}, {"job.name=arr"})).exit_code == 0);
  // as muster-sbatch --array names a task's run, <job.name>-<array job id>_<task id> (its
  // store keeps the run id it had)
  fs::rename(muster::test::only_run_dir(runs.path()), runs / "arr-77_0");
  const auto r = muster::test::run_process(
      {kMuster, "status", "--runs-dir", runs.path().string(), "77"}, {{}, {"SLURM_JOB_ID"}});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::StartsWith("Slurm array job 77: 1 task run in " + runs.path().string()) &&
                 Catch::Contains("\narr-") && Catch::Contains(" succeeded "));
}

TEST_CASE("the run directory's job.toml says the grad_accum_steps global_batch_size gave the run",
          "[local_run]") {
  muster::test::temp_dir runs;
  const auto r = muster::test::run_process(
      run_args(runs, 2, {}, {"train.global_batch_size=8", "train.micro_batch_size=2"}));
  REQUIRE(r.exit_code == 0);
  const auto toml = muster::test::read_file(muster::test::only_run_dir(runs.path()) / "job.toml");
  // the job's own value stays, so the file runs as well on another world
  CHECK_THAT(toml,
             Catch::Contains("\nglobal_batch_size = 8\n") &&
                 Catch::Contains("\ngrad_accum_steps = 1  # this run: 2 = global_batch_size 8 "
                                 "/ (micro_batch_size 2 x data parallel 2)\n"));
}

TEST_CASE(
    "a rank whose error came first is the first failure, though a peer it failed was reaped "
    "before it",
    "[local_run]") {
  muster::test::temp_dir runs;
  // rank 0 writes its error at 300 ms and takes 1.5 s more to end (its connections closed);
  // rank 1, whose collective that closed, fails at 600 ms
  const auto r = muster::test::run_process(
      run_args(runs, 2,
               {"--only-rank", "0", "--after-ms", "300", "--error-message",
                "cannot create checkpoint directory /ro/ck: Read-only file system", "--linger-ms",
                "1500", "--exit-code", "1", "--sleep-ms", "600", "--others-exit-code", "1"}));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("muster: rank 0 on ") &&
                        Catch::Contains("failed first (exit code 1); 1 other rank(s) of this node "
                                        "stopped") &&
                        Catch::Contains("error file: cannot create checkpoint directory"));
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  for (const auto& rank : reader.ranks()) {
    INFO("rank " << rank.rank);
    CHECK(rank.state ==
          (rank.rank == 0 ? muster::store::rank_state::failed : muster::store::rank_state::killed));
    CHECK(rank.exit_code == 1);
  }
}

TEST_CASE("one rank exiting 3 stops the others within a second and muster exits 3", "[local_run]") {
  muster::test::temp_dir runs;
  auto start = clock_type::now();
  auto r = muster::test::run_process(
      run_args(runs, 4,
               {"--only-rank", "2", "--after-ms", "300", "--exit-code", "3", "--sleep-ms", "60000",
                "--error-message", "CUDA out of memory. Tried to allocate 2.00 GiB"}));
  auto elapsed = clock_type::now() - start;
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 3);
  CHECK(elapsed < 300ms + 10s);  // no hang; the second is timed from the failure, below
  CHECK_THAT(r.err, Catch::Contains("muster: rank 2 on ") &&
                        Catch::Contains("failed first (exit code 3); 3 other rank(s) of this node "
                                        "stopped"));
  CHECK_THAT(r.err, Catch::Contains("error file: CUDA out of memory. Tried to allocate 2.00 GiB"));
  CHECK_THAT(r.err, Catch::Contains("[rank 2] rank 2: exiting with 3"));

  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  CHECK(reader.run()->state == muster::store::run_state::failed);
  std::int64_t failed_ms = 0;
  for (const auto& rank : reader.ranks())
    if (rank.rank == 2) failed_ms = rank.updated_ms;
  for (const auto& rank : reader.ranks()) {
    INFO("rank " << rank.rank);
    if (rank.rank == 2) {
      CHECK(rank.state == muster::store::rank_state::failed);
      CHECK(rank.exit_code == 3);
    } else {
      CHECK(rank.state == muster::store::rank_state::killed);  // stopped: a knock-on
      CHECK(rank.exit_code == 143);                            // the worker's SIGTERM exit
      // stopped within a second of the failure, by the run store's clock (start-up, slow
      // under the sanitizers on a loaded machine, is not part of the claim)
      CHECK(rank.updated_ms - failed_ms < 1000);
    }
  }
  int first = 0, knock_on = 0;
  for (const auto& e : reader.events()) {
    if (e.kind == "first_failure") {
      ++first;
      CHECK(e.rank == 2);
      CHECK_THAT(e.message, Catch::Contains("failed first: exit code 3"));
      CHECK_THAT(e.message, Catch::Contains("CUDA out of memory"));
    }
    knock_on += e.kind == "knock_on";
  }
  CHECK(first == 1);
  CHECK(knock_on == 3);
}

TEST_CASE("a rank killed by SIGKILL is recorded as a signal and muster exits 137", "[local_run]") {
  muster::test::temp_dir runs;
  auto r = muster::test::run_process(run_args(
      runs, 3, {"--only-rank", "1", "--after-ms", "200", "--signal", "9", "--sleep-ms", "60000"}));
  CHECK(r.exit_code == 128 + 9);
  CHECK_THAT(r.err, Catch::Contains("failed first (signal 9 (SIGKILL))"));
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  for (const auto& rank : reader.ranks())
    if (rank.rank == 1) {
      CHECK(rank.signal == 9);
      CHECK_FALSE(rank.exit_code.has_value());
    }
}

TEST_CASE("a worker ignoring SIGTERM is killed after launch.kill_grace", "[local_run]") {
  muster::test::temp_dir runs;
  auto start = clock_type::now();
  auto r =
      muster::test::run_process(run_args(runs, 2,
                                         {"--only-rank", "0", "--after-ms", "100", "--exit-code",
                                          "5", "--sleep-ms", "60000", "--ignore-term"},
                                         {"launch.kill_grace=1"}));
  auto elapsed = clock_type::now() - start;
  CHECK(r.exit_code == 5);
  CHECK(elapsed >= 1s);
  CHECK(elapsed < 3s);
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  for (const auto& rank : reader.ranks())
    if (rank.rank == 1) CHECK(rank.signal == 9);
  bool killed = false;
  for (const auto& e : reader.events()) killed |= e.kind == "kill";
  CHECK(killed);
}

TEST_CASE("a launcher killed with SIGKILL leaves no worker running, and status says lost at once",
          "[local_run]") {
  muster::test::temp_dir runs;
  // heartbeats every 100 ms: fresh when the launcher dies, so only its lock can say lost soon
  auto child = muster::test::spawn_process(
      run_args(runs, 4, {"--sleep-ms", "60000", "--heartbeat-ms", "100"}));
  auto pids = running_pids(runs, 4);
  const auto dir = muster::test::only_run_dir(runs.path());
  wait_for([&] { return fs::exists(dir / "logs" / "rank-3.heartbeat"); }, 5s, "heartbeats");
  const auto status = [&](const std::string& run) {
    std::vector<std::string> args{kMuster, "status", "--runs-dir", runs.path().string()};
    if (!run.empty()) args.push_back(run);
    const auto r = muster::test::run_process(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  // while the launcher runs (its lock held), the run is running in the list and in its view
  CHECK_THAT(status(""), Catch::Contains(dir.filename().string() + " ") &&
                             Catch::Contains("running") && !Catch::Contains("lost"));
  // a program of one's own lays out its ranks itself: no muster-train layout is shown
  CHECK_THAT(status(dir.string()), !Catch::Contains("\nlost ") && !Catch::Contains("\nlayout "));
  // diagnose of a run still going says so, where it would read only "no failure found"
  const auto diagnosed = muster::test::run_process({kMuster, "diagnose", dir.string()});
  CHECK_THAT(diagnosed.out, Catch::Contains("note: the run is still running (muster status " +
                                            dir.filename().string() + " follows it)"));
  ::kill(child.pid, SIGKILL);
  muster::test::wait_process(child.pid);
  ::close(child.out_fd);
  wait_for([&] { return std::all_of(pids.begin(), pids.end(), process_gone); }, 2s,
           "every worker to be gone");
  // nothing recorded its end, and the heartbeats are seconds old: the launcher's lock, free
  // now, says lost (no wait for the heartbeats to go stale)
  CHECK_THAT(status(dir.string()), Catch::Contains("\nlost      the store says running"));
  CHECK_THAT(status(""), Catch::Contains("lost") && !Catch::Contains("running"));
}

TEST_CASE("ranks the passed-on SIGUSR1 itself ended are said to have saved nothing",
          "[local_run]") {
  muster::test::temp_dir runs, out;
  // sleep has no handler: SIGUSR1 ends it, as it does a rank still starting up
  const pid_t launcher =
      muster::test::spawn_logged({kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                  "launch.nproc=2", "--", "sleep", "60"},
                                 {}, out / "launcher.log");
  running_pids(runs, 2);
  ::kill(launcher, SIGUSR1);
  const auto result = muster::test::wait_process(launcher);
  const auto said = muster::test::read_file(out / "launcher.log");
  INFO(said);
  CHECK(result.exit_code == 128 + SIGUSR1);
  CHECK_THAT(said, Catch::Contains("rank(s) 0, 1 ended by the signal itself, before they handled "
                                   "it: no checkpoint from them"));
}

TEST_CASE("SIGUSR1 to the launcher reaches every worker, SIGTERM stops them", "[local_run]") {
  muster::test::temp_dir runs;
  auto child = muster::test::spawn_process(run_args(runs, 3, {"--sleep-ms", "60000"}));
  running_pids(runs, 3);
  auto dir = muster::test::only_run_dir(runs.path());
  wait_for_first_lines(dir, 3);
  ::kill(child.pid, SIGUSR1);
  wait_for(
      [&] {
        for (int rank = 0; rank < 3; ++rank)
          if (!fs::exists(dir / ("signal-SIGUSR1-rank-" + std::to_string(rank)))) return false;
        return true;
      },
      5s, "every worker to get SIGUSR1");
  ::kill(child.pid, SIGTERM);
  auto result = muster::test::wait_process(child.pid);
  ::close(child.out_fd);
  CHECK(result.exit_code == 128 + SIGTERM);
  muster::store::run_reader reader(dir);
  CHECK(reader.run()->state == muster::store::run_state::cancelled);
  bool forwarded = false, stopping = false;
  int stopped_by_launcher = 0;
  for (const auto& e : reader.events()) {
    forwarded |= e.kind == "signal_forwarded" && e.message.find("SIGUSR1") != std::string::npos;
    stopping |= e.kind == "launcher_signal";
    // the ranks stopped on the launcher's signal: no failure is named
    if (e.kind == "knock_on") {
      INFO(e.message);
      CHECK_THAT(e.message, Catch::Contains("stopped on the launcher's SIGTERM"));
      ++stopped_by_launcher;
    }
  }
  CHECK(forwarded);
  CHECK(stopping);
  CHECK(stopped_by_launcher == 3);
  for (const auto& rank : reader.ranks()) CHECK(rank.exit_code == 143);
}

TEST_CASE(
    "ranks that stop on the passed-on SIGUSR1 as asked end the run cancelled, no failure "
    "and no restart",
    "[local_run]") {
  muster::test::temp_dir runs;
  // each rank "saves" for 50 ms after the signal, then exits 138 as the engine does
  muster::test::temp_dir out;
  const pid_t launcher = muster::test::spawn_logged(
      run_args(runs, 3, {"--sleep-ms", "60000", "--stop-on-usr1", "50"}, {"launch.max_restarts=2"}),
      {}, out / "launcher.log");
  running_pids(runs, 3);
  auto dir = muster::test::only_run_dir(runs.path());
  wait_for_first_lines(dir, 3);
  ::kill(launcher, SIGUSR1);
  auto result = muster::test::wait_process(launcher);
  const auto err = muster::test::read_file(out / "launcher.log");
  INFO(err);
  CHECK(result.exit_code == 128 + SIGUSR1);
  CHECK_THAT(err, Catch::Contains("the ranks stopped on the SIGUSR1 passed on to them, as asked"));
  CHECK_THAT(err, !Catch::Contains("failed first") && !Catch::Contains("restarting"));
  muster::store::run_reader reader(dir);
  CHECK(reader.run()->state == muster::store::run_state::cancelled);
  int stopped = 0;
  for (const auto& e : reader.events()) {
    stopped += e.kind == "stopped_as_asked";
    CHECK(e.kind != "first_failure");
    CHECK(e.kind != "restart");
  }
  CHECK(stopped == 3);
  for (const auto& rank : reader.ranks()) {
    CHECK(rank.exit_code == 128 + SIGUSR1);
    CHECK(rank.state == muster::store::rank_state::killed);
  }
}

TEST_CASE("bad input to muster run is one clear line and starts nothing", "[local_run]") {
  muster::test::temp_dir runs;
  auto missing = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + runs.path().string(), "--", "no-such-program-xyz"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::StartsWith("muster: command 'no-such-program-xyz' is not on the "
                                            "workers' PATH"));
  CHECK(fs::is_empty(runs.path()));
  auto typo = muster::test::run_process({kMuster, "run", "launch.nprocs=2", "--", kWorker});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("did you mean 'launch.nproc'?"));
  auto stray = muster::test::run_process({kMuster, "plan", "--", "x"});
  CHECK(stray.exit_code == 2);
  CHECK_THAT(stray.err,
             Catch::Contains("only `muster run` and `muster launch` take a program after --"));
  // what a torchrun user types first, each said in muster's words, and nothing started
  auto empty = muster::test::run_process({kMuster, "run", "launch.nproc=1", "--"});
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Catch::Contains("nothing after --: put the program there"));
  auto script = muster::test::run_process({kMuster, "run", "ddp.py"});
  CHECK(script.exit_code == 2);
  CHECK_THAT(script.err, Catch::Contains("ddp.py is a program, not a job file: put it after --, "
                                         "e.g. muster run job.toml -- python3 ddp.py"));
  for (const std::vector<std::string>& torchrun :
       {std::vector<std::string>{"--nproc-per-node", "4"}, {"--nproc_per_node=4"}}) {
    std::vector<std::string> argv = {kMuster, "run"};
    argv.insert(argv.end(), torchrun.begin(), torchrun.end());
    argv.insert(argv.end(), {"--", kWorker});
    const auto r = muster::test::run_process(argv);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("is torchrun's option; muster takes it from the job: give "
                                      "launch.nproc=4 after the job file"));
  }
  // a switch takes no value: the job file after it is not one
  auto flag = muster::test::run_process({kMuster, "run", "--qk-layernorm", "job.toml"});
  CHECK(flag.exit_code == 2);
  CHECK_THAT(flag.err, Catch::Contains("--qk-layernorm is Megatron's option; muster takes it from "
                                       "the job: give model.qk_norm=true after the job file"));
  auto no_optim = muster::test::run_process({kMuster, "run", "--no-load-optim", "job.toml"});
  CHECK_THAT(no_optim.err, Catch::Contains("give checkpoint.load_optim=false after"));
  // an option named as a key is (Megatron's --global-batch-size), and values made words
  // muster takes; muster's own options (plan's --nodes) are no other tool's
  auto global = muster::test::run_process({kMuster, "run", "--global-batch-size", "8"});
  CHECK_THAT(global.err, Catch::Contains("give train.global_batch_size=8 after the job file"));
  auto minutes = muster::test::run_process({kMuster, "run", "--distributed-timeout-minutes", "10"});
  CHECK_THAT(minutes.err, Catch::Contains("give comm.timeout=600 after"));
  auto data = muster::test::run_process({kMuster, "run", "--data-path", "/d/x"});
  CHECK_THAT(data.err, Catch::Contains("give 'data.paths=[\"/d/x\"]' after"));
  auto own = muster::test::run_process({kMuster, "plan", "--nodes", "2", "--gpus-per-node", "8"});
  CHECK(own.exit_code != 2);
  auto no_value = muster::test::run_process({kMuster, "config", "job.toml", "train.steps"});
  CHECK(no_value.exit_code == 2);
  CHECK_THAT(no_value.err, Catch::Contains("train.steps is no file: an override is written "
                                           "key=value (train.steps=...)"));
  CHECK(fs::is_empty(runs.path()));
  muster::test::write_file(runs / "file", "");
  auto blocked = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + (runs / "file").string(), "--", kWorker});
  CHECK(blocked.exit_code != 0);
  CHECK_THAT(blocked.err, Catch::StartsWith("muster: "));
  CHECK_THAT(blocked.err, Catch::Contains("file"));
}

TEST_CASE("a rank that stops its heartbeat is found hung, named, and fails the job",
          "[local_run]") {
  muster::test::temp_dir runs;
  auto start = clock_type::now();
  auto r =
      muster::test::run_process(run_args(runs, 3,
                                         {"--heartbeat-ms", "50", "--steps", "1000", "--sleep-ms",
                                          "60000", "--only-rank", "1", "--hang-after-ms", "200"},
                                         {"launch.timeout_hang=1", "launch.kill_grace=2"}));
  auto elapsed = clock_type::now() - start;
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGABRT);
  CHECK(elapsed < 4s);
  CHECK_THAT(r.err, Catch::Contains("muster: rank 1 is hung: SIGABRT sent; last heartbeats: "
                                    "rank 0: "));
  CHECK_THAT(r.err, Catch::Contains("failed first (hung (no heartbeat for "));
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  int hangs = 0;
  for (const auto& e : reader.events())
    if (e.kind == "hang") {
      ++hangs;
      CHECK(e.rank == 1);
      CHECK_THAT(e.message, Catch::Contains("rank 2: step "));            // every rank's last step
      CHECK_THAT(e.message, Catch::Contains("; behind: rank 1 (step "));  // and who lags
    }
  CHECK(hangs == 1);
}

TEST_CASE("a hung rank that ignores its hang signal is said once and killed after the grace",
          "[local_run]") {
  muster::test::temp_dir runs;
  const auto start = clock_type::now();
  auto r = muster::test::run_process(
      run_args(runs, 2,
               {"--heartbeat-ms", "50", "--steps", "1000", "--sleep-ms", "60000", "--only-rank",
                "1", "--hang-after-ms", "200", "--ignore-term"},
               {"launch.timeout_hang=1", "launch.hang_dump=false", "launch.kill_grace=2"}));
  const auto elapsed = clock_type::now() - start;
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(elapsed < 8s);  // 0.2 s + 1 s to be found hung + 2 s of grace, not 60 s
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  int hangs = 0;
  for (const auto& e : reader.events()) hangs += e.kind == "hang";
  CHECK(hangs == 1);  // not again every 100 ms while it survives
}

namespace {

// 3 ranks beating every 50 ms, rank 1's beats stopping after 300 ms as `how` says, found hung
// after 1 s and killed after `kill_grace` s.
muster::test::process_result run_hung(const muster::test::temp_dir& runs,
                                      std::vector<std::string> how, int kill_grace = 2) {
  std::vector<std::string> worker = {"--heartbeat-ms",  "50",    "--steps",     "1000",
                                     "--sleep-ms",      "60000", "--only-rank", "1",
                                     "--hang-after-ms", "300"};
  worker.insert(worker.end(), how.begin(), how.end());
  return muster::test::run_process(
      run_args(runs, 3, worker,
               {"launch.timeout_hang=1", "launch.kill_grace=" + std::to_string(kill_grace)}));
}

// A run of 3 ranks whose rank 1 hung: it failed, the others were stopped, and diagnose names it.
void check_hang_of_rank_1(const std::filesystem::path& dir) {
  for (const auto& rank : muster::store::run_reader(dir).ranks()) {
    INFO("rank " << rank.rank);
    CHECK(rank.state ==
          (rank.rank == 1 ? muster::store::rank_state::failed : muster::store::rank_state::killed));
  }
  const auto diagnosed = muster::test::run_process({kMuster, "diagnose", dir.string(), "--json"});
  const auto findings = nlohmann::json::parse(diagnosed.out)["findings"];
  REQUIRE_FALSE(findings.empty());
  CHECK(findings[0]["category"] == "hang_watchdog_stuck");
  CHECK(findings[0]["ranks"] == nlohmann::json::array({1}));
}

}  // namespace

TEST_CASE("ranks hung at once: the one a step behind is the hang, the others wait on it",
          "[local_run]") {
  muster::test::temp_dir runs;
  // every rank's beats stop at the same moment, rank 1's a step short: it never reached the
  // collective the others are stuck in
  auto r = run_hung(runs, {"--others-ahead"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGABRT);
  CHECK_THAT(r.err, Catch::Contains("failed first (hung (no heartbeat for "));
  const auto dir = muster::test::only_run_dir(runs.path());
  muster::store::run_reader reader(dir);
  // found hung in one check, each line names rank 1; on a busy machine the beats may stop far
  // enough apart for rank 1 to be found alone first, and the others never
  std::vector<std::int64_t> hung;
  int waited = 0;
  for (const auto& e : reader.events()) {
    if (e.kind != "hang") continue;
    hung.push_back(e.rank.value_or(-1));
    waited += e.message.find("; waited on: rank 1 (step ") != std::string::npos;
  }
  REQUIRE_FALSE(hung.empty());
  CHECK((waited == static_cast<int>(hung.size()) || hung == std::vector<std::int64_t>{1}));
  check_hang_of_rank_1(dir);
}

TEST_CASE("ranks hung at once on the same step: the one whose process is stopped is the hang",
          "[local_run]") {
  muster::test::temp_dir runs;
  // rank 1 stopped (SIGSTOP, a debugger) where the others' beats stop too, on the same step:
  // only its process state tells it from them
  auto r = run_hung(runs, {"--others-hang", "--stop-self"});
  INFO("stderr: " << r.err);
  CHECK_THAT(r.err, Catch::Contains("rank 1 on") && Catch::Contains("failed first"));
  const auto dir = muster::test::only_run_dir(runs.path());
  constexpr const char* kStopped = "waited on: rank 1 (its process is stopped";
  CHECK(muster::test::count_events(muster::store::run_reader(dir).events(), "hang",
                                   "; waited on: rank 1 (its process is stopped: SIGSTOP or a "
                                   "debugger holds it)") >= 1);
  check_hang_of_rank_1(dir);

  // stopped alone while the others still beat: it is the hang, and once continued it gets the
  // hang signal (its stack dumped where it stood)
  muster::test::temp_dir alone;
  r = run_hung(alone, {"--stop-self"}, 5);
  INFO("stderr: " << r.err);
  CHECK_THAT(r.err, Catch::Contains("rank 1 on") &&
                        Catch::Contains("failed first (hung (no heartbeat for ") &&
                        Catch::Contains("then signal 6 (SIGABRT)"));
  CHECK(muster::test::count_events(
            muster::store::run_reader(muster::test::only_run_dir(alone.path())).events(), "hang",
            kStopped) == 1);

  // the program a wrapper script started (`bash train.sh` running python, without exec) is the
  // one stopped: the rank's process group tells it
  muster::test::temp_dir wrapped;
  r = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + wrapped.path().string(), "launch.nproc=3",
       "launch.timeout_hang=1", "launch.kill_grace=5", "--", "/bin/sh", "-c",
       "\"$0\" \"$@\"; exit $?", kWorker, "--heartbeat-ms", "50", "--steps", "1000",
       "--sleep-ms", "60000", "--only-rank", "1", "--hang-after-ms", "300", "--stop-self"});
  INFO("stderr: " << r.err);
  CHECK(muster::test::count_events(
            muster::store::run_reader(muster::test::only_run_dir(wrapped.path())).events(), "hang",
            kStopped) == 1);

  // stopped before its first heartbeat (none of the ranks beats): how long it has been stopped
  // stands for its heartbeat's age, where it would hold the others for ever
  muster::test::temp_dir early;
  const auto started = std::chrono::steady_clock::now();
  r = muster::test::run_process(run_args(
      early, 2, {"--sleep-ms", "60000", "--only-rank", "1", "--hang-after-ms", "0", "--stop-self"},
      {"launch.timeout_hang=1", "launch.kill_grace=3"}));
  INFO("stderr: " << r.err);
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  CHECK_THAT(r.err, Catch::Contains("rank 1 on") && Catch::Contains("failed first (hung"));
  CHECK(muster::test::count_events(
            muster::store::run_reader(muster::test::only_run_dir(early.path())).events(), "hang",
            kStopped) == 1);
}

TEST_CASE("on a terminal, rank 0's heartbeat is a progress line redrawn in place", "[local_run]") {
  muster::test::temp_dir runs;
  const std::vector<std::string> worker = {"--heartbeat-ms", "50",  "--steps", "10",
                                           "--sleep-ms",     "1500"};
  muster::test::env_change env;
  env.set["TERM"] = "xterm";
  auto r = muster::test::run_in_terminal(run_args(runs, 2, worker), env);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[rank 0] rank 0 of 2 "));
  CHECK_THAT(r.out, Catch::Contains("\r\x1b[Kstep "));
  CHECK_THAT(r.out, Catch::Contains("/10 | loss "));
  CHECK_THAT(r.out, Catch::Contains(" tok/s | ETA "));
  CHECK_THAT(r.out, Catch::Contains("\r\x1b[Kstep 10/10 | loss 0.9091 | 81.9k tok/s | ETA 0s\n"));
  CHECK_THAT(r.out, Catch::EndsWith("\n"));  // the last line stays, the prompt goes below it

  auto piped = muster::test::run_process(run_args(runs, 2, worker), env);
  CHECK(piped.exit_code == 0);
  CHECK_THAT(piped.out, !Catch::Contains("\x1b[K"));  // a pipe or file gets no progress line
  CHECK_THAT(piped.out, !Catch::Contains("step "));
}

TEST_CASE("launch.max_restarts restarts the ranks in the same run, counting", "[local_run]") {
  muster::test::temp_dir runs;
  auto r = muster::test::run_process(
      run_args(runs, 2, {"--only-rank", "1", "--after-ms", "50", "--exit-code", "7"},
               {"launch.max_restarts=2", "launch.tee=none"}));
  CHECK(r.exit_code == 7);
  auto dir = muster::test::only_run_dir(runs.path());
  auto log = muster::test::read_file(dir / "logs" / "rank-1.log");
  CHECK_THAT(log, Catch::Contains("restart 0\n"));
  CHECK_THAT(log, Catch::Contains("restart 1\n"));
  CHECK_THAT(log, Catch::Contains("restart 2\n"));
  // each attempt's output starts with a line that says so
  CHECK(log.find("restart 0\n") < log.find("muster: restarting the ranks (1 of 2); the next"));
  CHECK(log.find("muster: restarting the ranks (2 of 2)") < log.find("restart 2\n"));
  muster::store::run_reader reader(dir);
  int restarts = 0;
  for (const auto& e : reader.events()) restarts += e.kind == "restart";
  CHECK(restarts == 2);
  CHECK(reader.run()->state == muster::store::run_state::failed);
}

TEST_CASE("launch.gpu_binding: every rank sees the node's GPUs, as torchrun, or only its own",
          "[local_run]") {
  muster::test::temp_dir runs;
  muster::test::env_change gpus;  // the GPUs this launcher may use, as Slurm would set them
  gpus.set["CUDA_VISIBLE_DEVICES"] = "4,5";
  auto visible = [&](const std::string& binding, int rank) {
    const auto where = runs / binding;
    const auto r = muster::test::run_process(
        {kMuster, "run", "launch.runs_dir=" + where.string(), "launch.nproc=2",
         "launch.gpu_binding=" + binding, "--", "/usr/bin/env"},
        gpus);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto log = muster::test::read_file(muster::test::only_run_dir(where) / "logs" /
                                             ("rank-" + std::to_string(rank) + ".log"));
    const auto at = log.find("\nCUDA_VISIBLE_DEVICES=");
    REQUIRE(at != std::string::npos);
    return log.substr(at + 22, log.find('\n', at + 1) - at - 22);
  };
  CHECK(visible("node", 1) == "4,5");  // the default: cuda:LOCAL_RANK works
  CHECK(visible("rank", 1) == "5");
  const auto bad =
      muster::test::run_process({kMuster, "run", "launch.runs_dir=" + (runs / "bad").string(),
                                 "launch.gpu_binding=gpu", "--", "/usr/bin/env"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("launch.gpu_binding"));
}

TEST_CASE("the GPU policy sets the workers' environment and records why", "[local_run]") {
  muster::test::temp_dir runs;
  auto r = muster::test::run_process({kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                      "launch.nproc=2", "parallel.tensor=2",
                                      "parallel.sequence_parallel=true",
                                      "parallel.sharding=no_shard", "--", "/usr/bin/env"});
  REQUIRE(r.exit_code == 0);
  auto dir = muster::test::only_run_dir(runs.path());
  CHECK_THAT(muster::test::read_file(dir / "logs" / "rank-1.log"),
             Catch::Contains("CUDA_DEVICE_MAX_CONNECTIONS=1\n"));
  muster::store::run_reader reader(dir);
  bool recorded = false;
  for (const auto& e : reader.events())
    recorded |=
        e.kind == "gpu_policy" &&
        e.message.find("cuda-max-connections-tp-cp: set CUDA_DEVICE_MAX_CONNECTIONS=1") == 0;
  CHECK(recorded);

  muster::test::env_change conflict;
  conflict.set["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
  auto refused =
      muster::test::run_process({kMuster, "run", "launch.runs_dir=" + (runs / "refused").string(),
                                 "comm.nccl_ub=true", "--", "/usr/bin/env"},
                                conflict);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("comm.nccl_ub = true and "
                                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True cannot "
                                          "be used together"));
  CHECK_FALSE(fs::exists(runs / "refused"));

  // user buffers under FSDP: a program of one's own is told to turn its double buffer on;
  // muster-train keeps its buffers, and is not
  const auto double_buffer_told = [&](const std::string& program, const std::string& name) {
    const auto r =
        muster::test::run_process({kMuster, "run", "launch.runs_dir=" + (runs / name).string(),
                                   "launch.nproc=1", "comm.nccl_ub=true", "--", program});
    REQUIRE(r.exit_code == 0);
    return r.err.find("nccl-ub-double-buffer") != std::string::npos &&
           r.err.find("--fsdp-double-buffer") != std::string::npos;
  };
  CHECK(double_buffer_told("/usr/bin/env", "own"));
  // Megatron-FSDP's flag on the command line says the double buffer is on
  const auto flagged = muster::test::run_process(
      {kMuster, "run", "launch.runs_dir=" + (runs / "flag").string(), "launch.nproc=1",
       "comm.nccl_ub=true", "--", "/bin/sh", "-c", "exit 0", "--fsdp-double-buffer"});
  CHECK(flagged.exit_code == 0);
  CHECK_THAT(flagged.err, !Catch::Contains("nccl-ub-double-buffer"));
  fs::create_directories(runs / "bin");
  fs::create_symlink("/usr/bin/env", runs / "bin" / "muster-train");
  CHECK_FALSE(double_buffer_told((runs / "bin" / "muster-train").string(), "engine"));
}

TEST_CASE("a console that goes away does not stop the run", "[local_run]") {
  muster::test::temp_dir runs;
  // Rank 0 prints 2000 lines to a console pipe the test closes at once.
  auto child =
      muster::test::spawn_process(run_args(runs, 2, {"--lines", "2000"}, {"launch.tee=all"}));
  ::close(child.out_fd);
  auto result = muster::test::wait_process(child.pid);
  CHECK(result.signal == 0);
  CHECK(result.exit_code == 0);
  auto log =
      muster::test::read_file(muster::test::only_run_dir(runs.path()) / "logs" / "rank-0.log");
  CHECK_THAT(log, Catch::Contains("rank 0 line 1999\n"));
}

TEST_CASE("a taken launch.master_port is one clear line naming the key", "[local_run]") {
  muster::test::temp_dir runs;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  auto r = muster::test::run_process(
      run_args(runs, 2, {}, {"launch.master_port=" + std::to_string(port)}));
  ::close(fd);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("muster: launch.master_port=" + std::to_string(port) +
                                      ": the port is in use on this host"));
  CHECK_THAT(r.err, Catch::Contains("set launch.master_port=0"));
  CHECK(fs::is_empty(runs.path()));
}

namespace {

// A tmpfs of `bytes` at a fresh directory, unmounted at the end; empty when this process may
// not mount (not root, or in a container without the capability).
class small_disk {
 public:
  explicit small_disk(const std::string& bytes) {
    const std::vector<std::string> args = {
        "mount", "-t", "tmpfs", "-o", "size=" + bytes, "tmpfs", dir_.path().string()};
    mounted_ = ::geteuid() == 0 && muster::test::run_process(args).exit_code == 0;
  }
  ~small_disk() {
    if (mounted_) muster::test::run_process({"umount", "-l", dir_.path().string()});
  }
  bool mounted() const { return mounted_; }
  const fs::path& path() const { return dir_.path(); }

 private:
  muster::test::temp_dir dir_;
  bool mounted_ = false;
};

}  // namespace

TEST_CASE("a full disk: one clear line before anything starts, mid-run the ranks go on",
          "[local_run]") {
  {
    small_disk disk("64k");
    if (!disk.mounted()) {
      WARN("SKIPPED: cannot mount a small tmpfs here (needs root)");
      return;
    }
    // fill it up
    std::ofstream fill(disk.path() / "fill");
    std::string block(4096, 'x');
    while (fill.write(block.data(), static_cast<std::streamsize>(block.size())) && fill.flush()) {
    }
    fill.close();
    auto r = muster::test::run_process(
        {kMuster, "run", "launch.runs_dir=" + (disk.path() / "runs").string(), "--", kWorker});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("muster: "));
    CHECK_THAT(r.err, Catch::Contains("full"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  {
    // room for the run store and the first lines, not for 3 MB of output
    small_disk disk("2m");
    REQUIRE(disk.mounted());
    auto r = muster::test::run_process({kMuster, "run", "launch.nproc=2", "launch.tee=none",
                                        "launch.runs_dir=" + (disk.path() / "runs").string(), "--",
                                        kWorker, "--lines", "60000", "--heartbeat-ms", "50",
                                        "--steps", "40", "--sleep-ms", "2000"});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);  // the ranks' own result
    CHECK_THAT(r.err, Catch::Contains("is full"));
    CHECK_THAT(r.err, Catch::Contains("the ranks go on, and this node records only their ends "
                                      "from now on (in room it kept for them)"));
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(disk.path() / "runs")) dirs.push_back(e.path());
    REQUIRE(dirs.size() == 1);
    muster::store::run_reader reader(dirs.front());
    CHECK(reader.integrity_check() == "ok");
    REQUIRE(reader.run());  // what was recorded before the disk filled up is still there
    // and the run's end, in the room kept for it: not a run that reads as lost
    CHECK(reader.run()->state == muster::store::run_state::succeeded);
    const auto ranks = reader.ranks();
    CHECK(ranks.size() == 2);
    for (const auto& rank : ranks) CHECK(rank.state == muster::store::rank_state::succeeded);
    for (const auto& e : fs::directory_iterator(dirs.front()))
      CHECK(e.path().filename().string().rfind(".store-reserve", 0) != 0);
  }
}

TEST_CASE("a rank that ended well long before its peers failed is said beside the first failure",
          "[local_run]") {
  muster::test::temp_dir runs;
  // rank 1 leaves after 200 ms with exit code 0; the others fail 3 s in, its connections gone
  auto r = muster::test::run_process(
      run_args(runs, 3,
               {"--only-rank", "1", "--after-ms", "200", "--exit-code", "0", "--sleep-ms", "3000",
                "--others-exit-code", "1"}));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Matches("(.|\n)*muster: rank 1 had ended well \\(exit code 0\\) "
                                   "[0-9.]+ s before, with the others still running(.|\n)*"));
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto diagnosed = muster::test::run_process({kMuster, "diagnose", dir.string()});
  CHECK_THAT(diagnosed.out, Catch::Contains("\nnote: rank 1 had ended well (exit code 0) ") &&
                                Catch::Contains("data uneven across the ranks"));
  // a rank that failed before any rank ended well: no such note
  muster::test::temp_dir later;
  r = muster::test::run_process(
      run_args(later, 2,
               {"--only-rank", "1", "--after-ms", "10", "--exit-code", "1", "--sleep-ms", "3000"}));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, !Catch::Contains("had ended well"));
}

// `muster status`'s reading of a run (launcher/status/run_status.hpp), on run stores written by
// the real node writer: progress at the newest complete step, laggards, restarts, failures.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "common/worker_error.hpp"
#include "launcher/local_run.hpp"
#include "launcher/run_recorder.hpp"
#include "launcher/status/run_status.hpp"
#include "launcher/status/slurm_job_state.hpp"
#include "launcher/status/status_output.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;
using namespace muster::launcher::status;

namespace {

store::step_record step(std::int64_t rank, std::int64_t n, double loss) {
  store::step_record s{rank, n, loss, 1000, 0.5, 1 << 20, 1000 + n};
  s.mfu = 0.25;
  return s;
}

// A run directory `id` under `runs`, node-a's store recording the run: `world` ranks on one
// node, made at `created`, updated a minute later.
store::run_paths recorded_run(const std::filesystem::path& runs, const std::string& id,
                              const std::string& name, store::run_state state,
                              store::epoch_ms created, std::int64_t world,
                              std::optional<std::string> slurm_job_id = std::nullopt) {
  store::run_paths paths(runs, id);
  paths.create();
  store::node_writer db(paths.node_db("node-a"));
  db.put_run({paths.run_id(), name, state, created, created + 59000, world, 1, slurm_job_id,
              paths.job_config().string(), "", std::nullopt, std::nullopt});
  return paths;
}

// recorded_run with its `world` ranks on node-a, each in `state` with `exit_code`, made a minute
// before `now`.
store::run_paths run_with_ranks(const std::filesystem::path& runs, store::run_state run_state,
                                store::rank_state state, std::int64_t exit_code, int world,
                                store::epoch_ms now) {
  const auto paths =
      recorded_run(runs, "job-20261128-100000-abcd", "job", run_state, now - 60000, world);
  store::node_writer db(paths.node_db("node-a"));
  for (int r = 0; r < world; ++r)
    db.put_rank({r, "node-a", r, 100 + r, state, exit_code, std::nullopt, now});
  return paths;
}

// A pid no process has: a child's, once it has exited and been reaped.
std::int64_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("a run whose launcher died unrecorded is lost: its running ranks' processes are gone",
          "[status]") {
  test::temp_dir tmp;
  store::run_paths paths(tmp.path(), "job-20261127-100000-abcd");
  paths.create();
  const auto now = store::now_ms();
  const auto here = launcher::short_hostname();
  const auto put = [&](std::int64_t rank, const std::string& host, std::int64_t pid,
                       store::rank_state state = store::rank_state::running) {
    store::node_writer db(paths.node_db("node-a"));
    db.put_rank({rank, host, rank, pid, state, std::nullopt, std::nullopt, now});
  };
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_run({paths.run_id(), "job", store::run_state::running, now - 60000, now - 1000, 3, 1,
                std::nullopt, paths.job_config().string(), "", std::nullopt, std::nullopt});
  }
  const auto gone = dead_pid();
  put(0, here, gone);
  put(1, here, ::getpid());                          // alive: this test
  put(2, here, gone, store::rank_state::succeeded);  // ended, as recorded
  // a heartbeat as fresh as a running rank's: not gone on its pid alone (another PID namespace of
  // this host name, or a launcher about to record the rank's end)
  muster::test::write_file(paths.rank_heartbeat_file(0), "step 3\n");
  auto s = read_run_status(paths.dir(), now);
  REQUIRE(s.ranks.size() == 3);
  CHECK_FALSE(s.ranks[0].gone);
  std::filesystem::last_write_time(
      paths.rank_heartbeat_file(0),
      std::filesystem::file_time_type::clock::now() - std::chrono::minutes(5));
  s = read_run_status(paths.dir(), now);
  CHECK(s.ranks[0].gone);
  CHECK_FALSE(s.ranks[1].gone);
  CHECK_FALSE(s.ranks[2].gone);
  CHECK_FALSE(s.lost);  // rank 1 still runs
  CHECK_THAT(status_text(s, now),
             Catch::Contains("<- process gone") && !Catch::Contains("\nlost "));
  // its pid given to a later process (after a reboot, say): this test started after a rank
  // recorded running a day ago, so it is not that rank
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_rank({1, here, 1, ::getpid(), store::rank_state::running, std::nullopt, std::nullopt,
                 now - 86'400'000});
  }
  s = read_run_status(paths.dir(), now);
  CHECK(s.ranks[1].gone);
  CHECK(s.lost);

  put(1, here, dead_pid());
  s = read_run_status(paths.dir(), now);
  CHECK(s.ranks[1].gone);
  CHECK(s.lost);
  CHECK_THAT(status_text(s, now),
             Catch::Contains("\nlost      the store says running, but its launcher and ranks are "
                             "gone") &&
                 Catch::Contains("  (lost, updated "));
  CHECK_THAT(status_json(s, now), Catch::Contains("\"lost\": true"));

  // a rank on another host is not this host's to judge: the run may go on there
  put(1, here + "-elsewhere", dead_pid());
  s = read_run_status(paths.dir(), now);
  CHECK_FALSE(s.ranks[1].gone);
  CHECK_FALSE(s.lost);
  // unless Slurm says the run's job is over: then no rank of it runs anywhere, unless one runs
  // here (squeue of another cluster, or an id used again)
  put(0, here, ::getpid());
  auto alive = read_run_status(paths.dir(), now);
  alive.run->slurm_job_id = "4242";
  CHECK(asks_slurm(alive));
  apply_job_state(alive, parse_job_state(0, "FAILED\n"));
  CHECK_FALSE(alive.lost);
  put(0, here, dead_pid());
  apply_job_state(s, parse_job_state(0, "RUNNING\n"));
  CHECK_FALSE(s.lost);
  s.run->slurm_job_id = "4242";
  apply_job_state(s, parse_job_state(0, "FAILED\n"));
  CHECK(s.lost);
  CHECK(s.ranks[1].gone);
  CHECK_FALSE(s.ranks[2].gone);  // its end is recorded
  CHECK(s.lost_why == "Slurm says job 4242 is over (FAILED)");
  CHECK_THAT(status_text(s, now),
             Catch::Contains("\nlost      the store says running, but Slurm says job 4242 is "
                             "over (FAILED): the launcher ended without recording it"));
}

TEST_CASE("squeue's word on one job: running, over, forgotten, or not known", "[status]") {
  using k = slurm_job_state::kind;
  CHECK(parse_job_state(0, "RUNNING").is == k::alive);
  CHECK(parse_job_state(0, "COMPLETING\n").is == k::alive);
  CHECK(parse_job_state(0, "PENDING").is == k::alive);  // requeued
  auto said = parse_job_state(0, " CANCELLED \n");
  CHECK(said.is == k::ended);
  CHECK(said.state == "CANCELLED");
  // an array job's tasks: over when every one is
  CHECK(parse_job_state(0, "COMPLETED\nRUNNING\n").is == k::alive);
  CHECK(parse_job_state(0, "COMPLETED\nTIMEOUT\n").is == k::ended);
  // squeue forgets a job MinJobAge after its end
  said = parse_job_state(1, "slurm_load_jobs error: Invalid job id specified");
  CHECK(said.is == k::ended);
  CHECK(said.state == "no longer known to Slurm");
  CHECK(parse_job_state(1, "slurm_load_jobs error: Unable to contact slurm controller").is ==
        k::unknown);
  CHECK(parse_job_state(0, "").is == k::unknown);
}

TEST_CASE("squeue --clusters: its cluster line is skipped, and this host's cluster is read",
          "[status]") {
  using k = slurm_job_state::kind;
  // squeue -M heads its answer with the cluster's name, even with --noheader
  auto said = parse_job_state(0, "CLUSTER: gpu-b\nFAILED\n");
  CHECK(said.is == k::ended);
  CHECK(said.state == "FAILED");
  CHECK(parse_job_state(0, "CLUSTER: gpu-b\nRUNNING\n").is == k::alive);
  CHECK(parse_job_state(1, "CLUSTER: gpu-b\nslurm_load_jobs error: Invalid job id specified").is ==
        k::ended);
  // without slurmdbd (Slurm 22.05's words): unknown, and the plain squeue asks where this
  // host's cluster is the run's
  CHECK(parse_job_state(1,
                        "squeue: error: Problem talking to database\nsqueue: error: 'gpu-b' "
                        "can't be reached now, or it is an invalid entry for --cluster.\n")
            .is == k::unknown);
  CHECK(parse_cluster_name("Configuration data as of 2026-11-27T10:00:00\nAccountingStorageType "
                           "  = accounting_storage/none\nClusterName             = gpu-b\n"
                           "CompleteWait = 0 sec\n") == "gpu-b");
  CHECK(parse_cluster_name("ClusterName=mustertest\n") == "mustertest");
  CHECK(parse_cluster_name("ClusterNameX = no\n").empty());
  CHECK(parse_cluster_name("").empty());
}

TEST_CASE("a rank two steps behind the others is a laggard, progress is the newest complete step",
          "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = recorded_run(tmp.path(), "job-20261122-100000-abcd", "job",
                                  store::run_state::running, now - 60000, 3, "4242");
  {
    store::node_writer db(paths.node_db("node-a"));
    for (int r = 0; r < 3; ++r)
      db.put_rank(
          {r, "node-a", r, 100 + r, store::rank_state::running, std::nullopt, std::nullopt, now});
    for (int n = 0; n < 6; ++n) {
      db.add_step(step(0, n, 3.0 - 0.1 * n));
      db.add_step(step(1, n, 3.0 - 0.1 * n));
      if (n < 4) db.add_step(step(2, n, 3.0 - 0.1 * n));
    }
    db.add_event({now - 5000, std::nullopt, store::severity::warn, "restart", "restart 1 of 2"});
  }
  std::ofstream(paths.job_config()) << "[train]\nsteps = 10\n";
  const auto s = read_run_status(paths.dir(), now);
  CHECK(s.steps_done == 6);
  CHECK(s.steps_planned == 10);
  REQUIRE(s.loss);
  CHECK(*s.loss == Approx(2.7));  // step 4 (index 3): the newest every rank finished
  CHECK(s.complete_steps == 4);
  CHECK(s.tokens_per_s == Approx(3 * 2000.0));
  CHECK(s.restarts == 1);
  REQUIRE(s.ranks.size() == 3);
  CHECK_FALSE(s.ranks[0].laggard);
  CHECK_FALSE(s.ranks[1].laggard);
  CHECK(s.ranks[2].laggard);
  CHECK(s.layout == "tp 1 cp 1 dp 3 pp 1 | etp 1 ep 1 edp 3 | optim_grads_params");
  // a program of one's own says its total in the heartbeat; train.steps is muster-train's
  std::ofstream(paths.rank_heartbeat_file(0)) << "step=6 steps=40 loss=2.5\n";
  CHECK(read_run_status(paths.dir(), now).steps_planned == 40);
  std::filesystem::remove(paths.rank_heartbeat_file(0));
  // and without one, a program that is not muster-train has no total (train.steps is not its)
  const auto program = [&](const std::string& path) {
    store::node_writer db(paths.node_db("node-a"));
    db.add_event({now, std::nullopt, store::severity::info, "program", "the ranks run " + path});
  };
  program("/usr/bin/python3");
  CHECK(read_run_status(paths.dir(), now).steps_planned == 0);
  program("/usr/bin/muster-train");  // (every node says the same: any that says it ran it)
  CHECK(read_run_status(paths.dir(), now).steps_planned == 10);
  const auto text = status_text(s, now);
  CHECK_THAT(text, Catch::Contains("step 6 of 10 | loss 2.7000") && Catch::Contains("<- behind"));
  // the loss and tok/s are of step 4, and say so
  CHECK_THAT(text, Catch::Contains("(at step 4, the newest every rank finished)"));
  // updated: by its newest step, not only the run's record (which changes with its state)
  auto later = s;
  later.history.back().time_ms = now + 30000;
  CHECK_THAT(status_text(later, now + 32000), Catch::Contains("(running, updated 2 s ago)"));
  // the Slurm job id finds it too
  CHECK(find_run("4242", tmp.path()) == paths.dir());
  // the list of runs is updated by the newest steps too
  {
    store::node_writer db(paths.node_db("node-a"));
    auto newest = step(0, 6, 2.4);
    newest.time_ms = now + 3000;  // the run's record: a second before now
    db.add_step(newest);
  }
  const auto listed = list_runs(tmp.path());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].updated_ms == now + 3000);
  CHECK_THAT(runs_text(listed, now + 5000, std::nullopt, {}), Catch::Contains(" 2 s ago"));
}

TEST_CASE("a program that writes only heartbeats shows their step as its progress", "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = run_with_ranks(tmp.path(), store::run_state::succeeded,
                                    store::rank_state::succeeded, 0, 2, now);
  std::ofstream(paths.rank_heartbeat_file(0)) << "step=2 steps=2 loss=0.125 tokens_per_s=900\n";
  std::ofstream(paths.rank_heartbeat_file(1)) << "step=1 steps=2\n";
  const auto s = read_run_status(paths.dir(), now);
  CHECK(s.steps_done == 2);  // the furthest rank's, as with steps files
  CHECK(s.steps_planned == 2);
  CHECK_THAT(status_text(s, now), Catch::Contains("progress  step 2 of 2\n"));
  // each rank's row says its own beat's step, loss and speed
  CHECK_THAT(status_text(s, now),
             Catch::Matches(R"((.|\n)*\n +0 +\S+ +succeeded +2 +0\.1250 +900 (.|\n)*)") &&
                 Catch::Matches(R"((.|\n)*\n +1 +\S+ +succeeded +1 +- +- (.|\n)*)"));
  // and the list of runs says the same
  const auto runs = list_runs(tmp.path());
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].steps_done == 2);
}

TEST_CASE("the start of a run id that several runs share names the newest", "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto make = [&](const std::string& id, std::int64_t created) {
    return recorded_run(tmp.path(), id, "tiny-moe", store::run_state::succeeded, created, 1).dir();
  };
  // the older one's id sorts after the newer one's: the choice is by when each was made
  const auto older = make("tiny-moe-20261128-090000-zzzz", now - 7200000);
  const auto newer = make("tiny-moe-20261128-080000-aaaa", now - 60000);
  CHECK(find_run("tiny-moe", tmp.path()) == newer);
  CHECK(find_run("tiny-moe-20261128-09", tmp.path()) == older);
  CHECK(find_run("tiny-moe-20261128-090000-zzzz", tmp.path()) == older);
  CHECK_THROWS_WITH(find_run("small-moe", tmp.path()),
                    Catch::StartsWith("small-moe: no run directory, run id or Slurm job id"));
}

TEST_CASE("after a restart without a checkpoint, progress is the new attempt's", "[status]") {
  test::temp_dir tmp;
  store::run_paths paths(tmp.path(), "job-20261127-100000-abcd");
  paths.create();
  const auto now = store::now_ms();
  const auto at = [](store::step_record r, store::epoch_ms t) {
    r.time_ms = t;
    return r;
  };
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_run({paths.run_id(), "job", store::run_state::running, now - 60000, now - 1000, 1, 1,
                std::nullopt, paths.job_config().string(), "", std::nullopt, std::nullopt});
    db.put_rank({0, "node-a", 0, 100, store::rank_state::running, std::nullopt, std::nullopt, now});
    for (int n = 0; n < 8; ++n) db.add_step(at(step(0, n, 3.0 - 0.1 * n), 1000 + n));
    db.add_event({5000, std::nullopt, store::severity::warn, "restart", "restart 1 of 2"});
  }
  auto s = read_run_status(paths.dir(), now);
  CHECK(s.steps_done == 8);  // the new attempt has no step yet: the last one's
  {
    store::node_writer db(paths.node_db("node-a"));
    for (int n = 0; n < 3; ++n) db.add_step(at(step(0, n, 2.0 - 0.1 * n), 6000 + n));
  }
  s = read_run_status(paths.dir(), now);
  CHECK(s.steps_done == 3);
  REQUIRE(s.loss);
  CHECK(*s.loss == Approx(1.8));
  CHECK(s.restarts == 1);

  // a requeue resumed at step 100 from a checkpoint: a rank with no step of it yet is not
  // 100 steps behind
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_rank({1, "node-a", 1, 101, store::rank_state::running, std::nullopt, std::nullopt, now});
    db.add_event({9000, std::nullopt, store::severity::warn, "resumed", "start 2 of this run"});
    db.add_step(at(step(0, 100, 1.0), 9500));
  }
  s = read_run_status(paths.dir(), now);
  CHECK(s.steps_done == 101);
  CHECK(s.first_step == 101);
  CHECK_THAT(status_text(s, now),
             Catch::Contains("\n          resumed: this start from step 101 on"));
  REQUIRE(s.ranks.size() == 2);
  CHECK_FALSE(s.ranks[1].laggard);
  // a job of one task per rank records no end: Slurm's COMPLETED is its end, no loss
  {
    store::node_writer db(paths.node_db("node-a"));
    db.add_event({9600, 0, store::severity::info, "exec", "rank 0 on node-a execs x"});
  }
  s = read_run_status(paths.dir(), now);
  s.run->slurm_job_id = "4242";
  CHECK(s.one_task_per_rank);
  CHECK(asks_slurm(s));
  apply_job_state(s, {slurm_job_state::kind::ended, "COMPLETED"});
  CHECK_FALSE(s.lost);
  CHECK(s.slurm_ended == "COMPLETED");
  CHECK_THAT(status_text(s, now), Catch::Contains("(ended: Slurm says COMPLETED, updated ") &&
                                      Catch::Contains("sacct -j 4242"));
}

TEST_CASE("ranks that are their own Slurm tasks: their steps and errors are read from their files",
          "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = recorded_run(tmp.path(), "job-1234", "job", store::run_state::running,
                                  now - 60000, 2, "1234");
  {
    store::node_writer db(paths.node_db("node-a"));
    for (int r = 0; r < 2; ++r) {
      db.put_rank(
          {r, "node-a", r, 100 + r, store::rank_state::running, std::nullopt, std::nullopt, now});
      db.add_event({now, r, store::severity::info, "exec", "rank execs x"});
    }
  }
  std::filesystem::create_directories(paths.dir() / "logs");
  std::ofstream(paths.rank_steps_file(0)) << "step=0 loss=3.5 tokens=10 step_time_s=0.5\n"
                                          << "step=1 loss=3.3 tokens=10 step_time_s=0.5\n"
                                          // a requeue's attempt, from its checkpoint of step 1
                                          << "step=1 loss=3.25 tokens=10 step_time_s=0.5\n"
                                          << "step=2 loss=3.0";  // still being written
  std::ofstream(paths.rank_steps_file(1)) << "step=0 loss=3.75 tokens=10 step_time_s=0.5\n";
  std::ofstream(paths.rank_error_file(1))
      << format_worker_error({"out of memory", "forward", "oom", 1, now});
  const auto s = read_run_status(paths.dir(), now);
  CHECK(s.one_task_per_rank);
  REQUIRE(s.history.size() == 3);  // one record a (rank, step), as the store keeps them
  CHECK(s.history[0].rank == 0);
  CHECK(s.history[1].rank == 1);  // by step, then rank, as the store orders them
  CHECK(s.history[2].step == 1);
  CHECK(s.history[2].loss == 3.25);  // the newest
  CHECK(s.steps_done == 2);
  CHECK(s.complete_steps == 1);
  REQUIRE(s.errors.size() == 1);
  CHECK(s.errors[0].rank == 1);
  CHECK(s.errors[0].kind == "oom");
  CHECK(s.errors[0].step == 1);
  // an error file still empty is no error yet
  std::ofstream(paths.rank_error_file(0)) << "";
  CHECK(read_run_status(paths.dir(), now).errors.size() == 1);
  // on the ranks' own host, their processes gone: no loss (no launcher records their end; the
  // store says running), Slurm is asked
  {
    store::node_writer db(paths.node_db("node-a"));
    for (int r = 0; r < 2; ++r)
      db.put_rank({r, muster::launcher::short_hostname(), r, dead_pid(), store::rank_state::running,
                   std::nullopt, std::nullopt, now});
  }
  const auto here = read_run_status(paths.dir(), now + 600000);
  CHECK(here.ranks[0].gone);
  CHECK_FALSE(here.lost);
  CHECK(asks_slurm(here));
}

TEST_CASE("a run directory without a run store is named, with what to read instead", "[status]") {
  muster::test::temp_dir tmp;
  // a Slurm job whose launchers never met: job.toml, logs and slurm.out, no node-*.db
  const auto dir = tmp / "tiny-moe-77";
  std::filesystem::create_directories(dir / "logs");
  std::ofstream(dir / "slurm.out") << "muster: rendezvous: 1 of 2 nodes reached ...\n";
  for (const auto& what : std::vector<std::string>{"77", "tiny-moe-77", dir.string()}) {
    INFO(what);
    CHECK_THROWS_WITH(
        find_run(what, tmp.path()),
        Catch::Contains("holds no run store") &&
            Catch::EndsWith("muster diagnose " + what + " reads " + (dir / "slurm.out").string() +
                            " and " + (dir / "logs").string()));
    // diagnose takes it, to read those
    CHECK(std::filesystem::equivalent(find_run(what, tmp.path(), /*storeless=*/true), dir));
  }
  CHECK_THROWS_WITH(find_run("78", tmp.path()),
                    Catch::StartsWith("78: no run directory, run id or Slurm job id"));
  // the list names it, beside the runs
  CHECK(storeless_runs(tmp.path()) == std::vector<std::filesystem::path>{dir});
  CHECK_THAT(runs_text({}, store::now_ms(), std::nullopt, storeless_runs(tmp.path())),
             Catch::Contains("tiny-moe-77") && Catch::Contains("no run store: its launchers "
                                                               "stopped before any rank started"));
  // while squeue still has the job, it is starting: its launchers are meeting
  const auto queued = muster::launcher::status::parse_squeue("77|RUNNING|0:05|2|n[1-2]|tiny-moe\n");
  CHECK_THAT(runs_text({}, store::now_ms(), queued, storeless_runs(tmp.path())),
             Catch::Contains("tiny-moe-77") &&
                 Catch::Contains("no run store yet: Slurm job 77 is RUNNING, its launchers are "
                                 "starting"));
  // without logs/ it names only what is there
  std::filesystem::remove_all(dir / "logs");
  CHECK_THROWS_WITH(find_run("77", tmp.path()),
                    Catch::EndsWith("muster diagnose 77 reads " + (dir / "slurm.out").string()));
}

TEST_CASE("an array job's id finds its one task run, and names them all when it has several",
          "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto task_run = [&](const std::string& id) {  // a task run as muster launch writes it
    store::run_paths paths(tmp.path(), "arr-" + id);
    paths.create();
    store::node_writer db(paths.node_db("gpu-a01"));
    db.put_run({paths.run_id(), "arr", store::run_state::succeeded, now, now, 1, 1, id,
                paths.job_config().string(), "", std::nullopt, std::nullopt});
    return paths.dir();
  };
  const auto first = task_run("18_0");
  CHECK(array_task_runs("18", tmp.path()) == std::vector<std::filesystem::path>{first});
  CHECK(std::filesystem::equivalent(find_run("18", tmp.path()), first));
  CHECK(std::filesystem::equivalent(find_run("18_0", tmp.path()), first));
  // the task ids in order of number, a task without a store too (its launchers never met)
  std::filesystem::create_directories(tmp / "arr-18_10");
  const auto second = task_run("18_2");
  task_run("180_1");  // another job's
  task_run("7_18_1");
  CHECK(array_task_runs("18", tmp.path()) ==
        std::vector<std::filesystem::path>{first, second, tmp / "arr-18_10"});
  for (const bool storeless : {false, true})
    CHECK_THROWS_WITH(find_run("18", tmp.path(), storeless),
                      "18: Slurm array job 18 has 3 task runs in " + tmp.path().string() +
                          ": arr-18_0, arr-18_2, arr-18_10; give one as <array job id>_<task "
                          "id> (18_0) or by its directory");
  CHECK(array_task_runs("18_0", tmp.path()).empty());  // a task's id is no array's
  CHECK(array_task_runs("", tmp.path()).empty());
  CHECK_THROWS_WITH(find_run("19", tmp.path()),
                    Catch::StartsWith("19: no run directory, run id or Slurm job id"));
  // a task by its own job id, which its slurm.out's link names, before it has a store (its
  // launchers never met): the directory, and what there is to read
  std::ofstream(tmp / "slurm-31.out") << "muster: rendezvous: ...\n";
  std::filesystem::create_symlink("../slurm-31.out", tmp / "arr-18_10" / "slurm.out");
  CHECK(std::filesystem::equivalent(find_run("31", tmp.path(), true), tmp / "arr-18_10"));
  CHECK_THROWS_WITH(find_run("31", tmp.path()),
                    Catch::StartsWith("31: the run directory " + (tmp / "arr-18_10").string() +
                                      " holds no run store") &&
                        Catch::EndsWith("muster diagnose 31 reads " +
                                        (tmp / "arr-18_10" / "slurm.out").string()));
  CHECK_THROWS_WITH(find_run("32", tmp.path()),
                    Catch::StartsWith("32: no run directory, run id or Slurm job id"));
}

TEST_CASE("squeue's lines are read with the job name last, and odd lines skipped", "[status]") {
  const auto list = muster::launcher::status::parse_squeue(
      "4242|RUNNING|1:02:03|2|gpu-a[01-02]|pretrain|moe\n"
      "4243_7|PENDING|0:00|4|(Priority)|sweep\n"
      "slurm_load_jobs error: Unable to contact slurm controller\n"
      "|RUNNING|0:01|1|x|no id\n");
  REQUIRE(list.jobs.size() == 2);
  CHECK(list.jobs[0].id == "4242");
  CHECK(list.jobs[0].where == "gpu-a[01-02]");
  CHECK(list.jobs[0].name == "pretrain|moe");
  CHECK(list.jobs[1].id == "4243_7");
  CHECK(list.jobs[1].state == "PENDING");
  CHECK(list.jobs[1].where == "(Priority)");
  CHECK(list.error.empty());
}

TEST_CASE("a job id finds its job, an array's task in the pending array too", "[status]") {
  const auto list = muster::launcher::status::parse_squeue(
      "4242|RUNNING|1:02:03|2|gpu-a[01-02]|pretrain\n"
      "4250_[0-7]|PENDING|0:00|1|(Priority)|sweep\n"
      "4260_2|RUNNING|0:10|1|gpu-b01|other\n");
  const auto id_of = [&](std::string_view id) {
    const auto* j = find_job(list, id);
    return j ? j->id : std::string("none");
  };
  CHECK(id_of("4242") == "4242");
  CHECK(id_of("4250") == "4250_[0-7]");
  CHECK(id_of("4250_3") == "4250_[0-7]");
  CHECK(id_of("4260") == "4260_2");
  CHECK(id_of("4260_2") == "4260_2");
  CHECK(id_of("4260_5") == "none");  // that task is not in the queue
  CHECK(id_of("424") == "none");
  CHECK(id_of("") == "none");
}

TEST_CASE("the first failure shows the end of the rank's last output on a line of its own",
          "[status]") {
  test::temp_dir tmp;
  store::run_paths paths(tmp.path(), "job-20261127-110000-abcd");
  paths.create();
  const auto now = store::now_ms();
  const std::string output = std::string(2000, 'x') + " | Traceback ... | RuntimeError: boom";
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_run({paths.run_id(), "job", store::run_state::failed, now - 60000, now - 1000, 2, 1,
                std::nullopt, paths.job_config().string(), "", std::nullopt, std::nullopt});
    db.add_event({now - 2000, 1, store::severity::error, "first_failure",
                  "rank 1 on node-a (pid 42) failed first: exit code 1; last output: " + output});
  }
  const auto text = status_text(read_run_status(paths.dir(), now), now);
  CHECK_THAT(text, Catch::Contains("\nfirst failure: rank 1 on node-a (pid 42) failed first: exit "
                                   "code 1\n  last output: ...") &&
                       Catch::Contains(" | Traceback ... | RuntimeError: boom\n"));
  std::size_t longest = 0;
  for (std::size_t at = 0; at < text.size();) {
    const auto nl = std::min(text.find('\n', at), text.size());
    longest = std::max(longest, nl - at);
    at = nl + 1;
  }
  CHECK(longest < 450);
}

TEST_CASE("the ranks of a run stopped by a signal are said to have stopped as asked", "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = run_with_ranks(tmp.path(), store::run_state::cancelled,
                                    store::rank_state::killed, 138, 2, now);
  const auto text = status_text(read_run_status(paths.dir(), now), now);
  CHECK_THAT(text, Catch::Contains("exit 138 (stopped as asked)"));
  // a failed run's killed ranks were stopped by the failure, not asked
  const auto failed = recorded_run(tmp.path(), "job-20261128-110000-abcd", "job",
                                   store::run_state::failed, now - 60000, 1);
  store::node_writer(failed.node_db("node-a"))
      .put_rank({0, "node-a", 0, 100, store::rank_state::killed, 143, std::nullopt, now});
  CHECK_THAT(status_text(read_run_status(failed.dir(), now), now),
             Catch::Contains("exit 143") && !Catch::Contains("as asked"));
  // a rank the pre-timeout warning itself ended had no handler for it; Slurm's SIGKILL at the
  // time limit is no stop asked for
  const auto usr1 = recorded_run(tmp.path(), "job-20261128-120000-abcd", "job",
                                 store::run_state::cancelled, now - 60000, 1);
  store::node_writer(usr1.node_db("node-a"))
      .put_rank({0, "node-a", 0, 100, store::rank_state::killed, std::nullopt, SIGUSR1, now});
  CHECK_THAT(status_text(read_run_status(usr1.dir(), now), now),
             Catch::Contains("signal 10 (no handler for it: saved nothing)"));
  auto timed_out = read_run_status(paths.dir(), now);
  timed_out.slurm_now = "TIMEOUT";
  for (auto& r : timed_out.ranks) r.rank.signal = SIGKILL;
  CHECK_THAT(status_text(timed_out, now), Catch::Contains("signal 9 (killed at the time limit)"));
}

TEST_CASE("a rank's last output leaves out faulthandler's module list after its stack",
          "[run_status]") {
  using muster::launcher::kLastOutput;
  using muster::launcher::last_output_tail;
  const std::string dump = std::string("rank 0 failed first") + std::string(kLastOutput) +
                           "Thread 0x7f (most recent call first): |   File \"<string>\", line 3 "
                           "in wait_for_peer | Extension modules: numpy.core._multiarray_umath, "
                           "torch._C (total: 2)";
  CHECK(last_output_tail(dump) ==
        "Thread 0x7f (most recent call first): |   File \"<string>\", line 3 in wait_for_peer");
  // any other last line stays
  CHECK(last_output_tail(std::string("x") + std::string(kLastOutput) + "a | b") == "a | b");
  CHECK_FALSE(last_output_tail("no output here"));
}

TEST_CASE("a rank its node's launcher left running in a run another node ended is gone",
          "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  // node-a's launcher recorded the end; node-b's died with its node, its rank left running
  const auto paths = recorded_run(tmp.path(), "job-20261128-100000-abcd", "job",
                                  store::run_state::cancelled, now - 60000, 2, "4242");
  {
    store::node_writer a(paths.node_db("node-a"));
    a.put_rank({0, "node-a", 0, 1, store::rank_state::killed, 143, std::nullopt, now - 1000});
    store::node_writer b(paths.node_db("node-b"));
    b.put_run({paths.run_id(), "job", store::run_state::running, now - 60000, now - 50000, 2, 2,
               std::string("4242"), paths.job_config().string(), "", std::nullopt, std::nullopt});
    b.put_rank(
        {1, "node-b", 0, 1, store::rank_state::running, std::nullopt, std::nullopt, now - 50000});
  }
  // a fresh heartbeat: node-b may still be stopping it
  muster::test::write_file(paths.rank_heartbeat_file(1), "step=3\n");
  auto s = read_run_status(paths.dir(), now);
  REQUIRE(s.ranks.size() == 2);
  CHECK(s.run->state == store::run_state::cancelled);
  CHECK_FALSE(s.ranks[1].gone);
  CHECK(asks_slurm(s));  // whose word settles it
  apply_job_state(s, parse_job_state(0, "NODE_FAIL\n"));
  CHECK(s.ranks[1].gone);
  CHECK_FALSE(s.lost);  // the run's end is recorded: cancelled, not lost
  CHECK_THAT(status_text(s, now), Catch::Contains("<- process gone"));
  // its heartbeat as old as a laggard's: gone without asking
  std::filesystem::last_write_time(
      paths.rank_heartbeat_file(1),
      std::filesystem::file_time_type::clock::now() - std::chrono::minutes(5));
  s = read_run_status(paths.dir(), now);
  CHECK(s.ranks[1].gone);
  CHECK_FALSE(asks_slurm(s));
}

TEST_CASE("restarts count the restarts that happened, once for all nodes", "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = recorded_run(tmp.path(), "job-4242", "job", store::run_state::running,
                                  now - 60000, 4, "4242");
  const auto event = [&](const char* host, std::int64_t at, const char* kind, std::string text) {
    store::node_writer db(paths.node_db(host));
    db.add_event({now - at, std::nullopt, store::severity::warn, kind, std::move(text)});
  };
  // start 0: both nodes restart their ranks once, then node 0 asks for a requeue
  event("node-a", 50000, "restart", "restart 1 of 2 after rank 1 failed");
  event("node-b", 50000, "restart", "restart 1 of 2 after rank 1 failed");
  event("node-a", 40000, "requeue", "requeued job 4242 after SIGUSR1, seen first on node-a");
  CHECK(read_run_status(paths.dir(), now).restarts == 1);  // the requeue is not a start yet
  // start 1 (the requeued job): both nodes resume, then restart once more
  event("node-a", 30000, "resumed", "start 2 of this run (SLURM_RESTART_COUNT=1): resuming in x");
  event("node-b", 30000, "resumed", "start 2 of this run (SLURM_RESTART_COUNT=1): resuming in x");
  event("node-b", 20000, "restart", "restart 1 of 2 after rank 3 failed");
  event("node-a", 20000, "restart", "restart 1 of 2 after rank 3 failed");
  CHECK(read_run_status(paths.dir(), now).restarts == 3);
}

TEST_CASE("a running rank whose process is stopped is marked so", "[status]") {
  test::temp_dir tmp;
  const auto now = store::now_ms();
  const auto paths = recorded_run(tmp.path(), "job-20261128-110000-abcd", "job",
                                  store::run_state::running, now - 60000, 1);
  const test::stopped_child stopped;
  const pid_t child = stopped.pid();
  {
    store::node_writer db(paths.node_db("node-a"));
    db.put_rank({0, launcher::short_hostname(), 0, child, store::rank_state::running, std::nullopt,
                 std::nullopt, now});
  }
  const auto s = read_run_status(paths.dir(), now);
  REQUIRE(s.ranks.size() == 1);
  CHECK(s.ranks[0].stopped_here);
  CHECK_THAT(status_text(s, now), Catch::Contains("<- process stopped (SIGSTOP or a debugger)"));
}

TEST_CASE(
    "a Slurm job with no run yet says where its run directory will be, an array's each task's",
    "[status]") {
  const auto one = job_text({"4242", "PENDING", "0:00", "2", "(Priority)", "pt"}, "/runs");
  CHECK_THAT(one, Catch::StartsWith("Slurm job 4242 (pt) is PENDING (Priority): no run of it in "
                                    "/runs yet\n") &&
                      Catch::Contains("its run directory, /runs/pt-4242 (<job.name>-<job id>), "
                                      "appears when its muster launch starts"));
  // squeue's one line for an array's pending tasks, throttled or not
  for (const std::string id : {"7_[0-2]", "7_[0-2%1]"}) {
    const auto array = job_text({id, "PENDING", "0:00", "1", "(None)", "arr"}, "/runs");
    INFO(array);
    CHECK_THAT(array, Catch::Contains("each of its array tasks (0-2) gets its own run directory, "
                                      "/runs/arr-7_<task id> (<job.name>-<array job id>_<task "
                                      "id>), when its muster launch starts") &&
                          Catch::Contains("squeue -j 7 says more") && !Catch::Contains("arr-7_["));
  }
}

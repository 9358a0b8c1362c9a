// `muster launch` across "nodes" on loopback: each launcher is a real process with the
// environment srun gives a task of a 2-node step (the variables of tests/launcher/slurm_env's
// captures), launch.master_addr=127.0.0.1 since the node names do not resolve here. The
// launchers rendezvous through node 0's store over real sockets, start real workers
// (muster-test-worker), and fail fast across nodes. (The Slurm integration tests run the same
// binary under a real srun.)
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "common/run_reader.hpp"
#include "tests/support/launch_output.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using muster::test::contract_lines;
using muster::test::has_event;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kWorker = std::string(MUSTER_BIN_DIR) + "/muster-test-worker";

// A job id of this test process's own, so parallel tests never share a derived port list.
std::uint32_t fresh_job_id() {
  static std::uint32_t next = 100000 + static_cast<std::uint32_t>(::getpid() % 50000) * 16;
  return next++;
}

// The environment srun gives task `task` of a step over gpu-a[01-NN] with `per_node` tasks on
// each node (block distribution).
muster::test::env_change step_env(std::uint32_t job_id, int nodes, int per_node, int task) {
  const int node = task / per_node;
  const std::string list = "gpu-a[01-" + std::string(nodes < 10 ? "0" : "") + std::to_string(nodes) + "]";
  const std::string tpn = std::to_string(per_node) + "(x" + std::to_string(nodes) + ")";
  const std::string ntasks = std::to_string(nodes * per_node);
  muster::test::env_change env;
  env.set = {{"SLURM_JOB_ID", std::to_string(job_id)},
             {"SLURM_STEP_ID", "0"},
             {"SLURM_JOB_NODELIST", list},
             {"SLURM_STEP_NODELIST", list},
             {"SLURM_NNODES", std::to_string(nodes)},
             {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
             {"SLURM_NTASKS", ntasks},
             {"SLURM_STEP_NUM_TASKS", ntasks},
             {"SLURM_TASKS_PER_NODE", tpn},
             {"SLURM_STEP_TASKS_PER_NODE", tpn},
             {"SLURM_PROCID", std::to_string(task)},
             {"SLURM_LOCALID", std::to_string(task % per_node)},
             {"SLURM_NODEID", std::to_string(node)},
             {"SLURMD_NODENAME", "gpu-a0" + std::to_string(node + 1)},
             {"MUSTER_LOG_LEVEL", "warn"}};
  env.unset = {"SLURM_RESTART_COUNT", "CUDA_VISIBLE_DEVICES", "SLURM_ARRAY_JOB_ID",
               "SLURM_ARRAY_TASK_ID", "SLURM_GPUS_ON_NODE"};
  return env;
}

std::vector<std::string> launch_args(const fs::path& runs, std::vector<std::string> worker_args,
                                     std::vector<std::string> overrides = {}) {
  std::vector<std::string> args = {kMuster, "launch", "launch.runs_dir=" + runs.string(),
                                   "launch.master_addr=127.0.0.1", "launch.nproc=2"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.push_back("--");
  args.push_back(kWorker);
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  return args;
}

// Starts one launcher per task of the step (at once, each from its own thread) and waits for
// all of them; node 1's tasks get `node1_args` when given.
std::vector<muster::test::process_result> run_step(std::uint32_t job_id, int nodes, int per_node,
                                                   const std::vector<std::string>& args,
                                                   std::vector<std::string> node1_args = {}) {
  std::vector<std::future<muster::test::process_result>> running;
  for (int task = 0; task < nodes * per_node; ++task) {
    const auto& a = task / per_node == 1 && !node1_args.empty() ? node1_args : args;
    running.push_back(std::async(std::launch::async, [a, env = step_env(job_id, nodes, per_node, task)] {
      return muster::test::run_process(a, env);
    }));
  }
  std::vector<muster::test::process_result> results;
  for (auto& r : running) results.push_back(r.get());
  return results;
}

// The run directory under `runs` once each of `ranks` ranks has written to its log (runs);
// fails the test after 10 s.
fs::path wait_for_ranks(const fs::path& runs, int ranks) {
  const auto end = clock_type::now() + 10s;
  for (;;) {
    REQUIRE(clock_type::now() < end);
    std::this_thread::sleep_for(20ms);
    if (!fs::exists(runs) || fs::is_empty(runs)) continue;
    const auto dir = muster::test::only_run_dir(runs);
    int started = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      auto log = dir / "logs" / ("rank-" + std::to_string(rank) + ".log");
      std::error_code ec;
      started += fs::file_size(log, ec) > 0 && !ec;
    }
    if (started == ranks) return dir;
  }
}

}  // namespace

TEST_CASE("two nodes rendezvous through node 0 and start 4 ranks with global ranks", "[launch]") {
  muster::test::temp_dir runs;
  const auto job = fresh_job_id();
  auto results = run_step(job, 2, 1, launch_args(runs.path(), {"--sleep-ms", "100"}));
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
  }
  auto dir = muster::test::only_run_dir(runs.path());
  CHECK(dir.filename() == "muster-job-" + std::to_string(job));
  std::set<int> ports;
  for (int rank = 0; rank < 4; ++rank) {
    auto lines =
        contract_lines(muster::test::read_file(dir / "logs" / ("rank-" + std::to_string(rank) + ".log")));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == muster::test::two_nodes_of_two(rank, lines[0].port));
    ports.insert(lines[0].port);
  }
  CHECK(ports.size() == 1);  // every rank has the same MASTER_PORT
  muster::store::run_reader reader(dir);
  CHECK(reader.hosts() == std::vector<std::string>{"gpu-a01", "gpu-a02"});
  REQUIRE(reader.run());
  CHECK(reader.run()->world_size == 4);
  CHECK(reader.run()->num_nodes == 2);
  CHECK(reader.run()->slurm_job_id == std::to_string(job));
  auto ranks = reader.ranks();
  REQUIRE(ranks.size() == 4);
  for (const auto& r : ranks) {
    CHECK(r.state == muster::store::rank_state::succeeded);
    CHECK(r.host == (r.rank < 2 ? "gpu-a01" : "gpu-a02"));
    CHECK(r.local_rank == r.rank % 2);
  }
}

TEST_CASE("a rank failing on node 1 stops node 0's ranks within a second, both exit 3",
          "[launch]") {
  muster::test::temp_dir runs;
  auto start = clock_type::now();
  auto results = run_step(fresh_job_id(), 2, 1,
                          launch_args(runs.path(), {"--sleep-ms", "60000", "--only-rank", "3",
                                                    "--after-ms", "300", "--exit-code", "3",
                                                    "--error-message", "NCCL timeout"}));
  auto elapsed = clock_type::now() - start;
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 3);
  }
  CHECK(elapsed < 300ms + 10s);  // no hang; the second is timed from the failure, below
  CHECK_THAT(results[0].err, Catch::Contains("rank 3 on gpu-a02 failed first: exit code 3; error "
                                             "file: NCCL timeout; 2 rank(s) of this node stopped"));
  CHECK_THAT(results[1].err, Catch::Contains("rank 3 on gpu-a02 failed first (exit code 3)"));
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  auto events = reader.events();
  CHECK(has_event(events, "first_failure", "rank 3 on gpu-a02"));
  CHECK(has_event(events, "first_failure_elsewhere", "rank 3 on gpu-a02 failed first"));
  CHECK(has_event(events, "remote_failure", "rank 3 on gpu-a02 failed first"));
  const auto ranks = reader.ranks();
  std::int64_t failed_ms = 0;
  for (const auto& r : ranks)
    if (r.rank == 3) failed_ms = r.updated_ms;
  for (const auto& r : ranks) {
    INFO("rank " << r.rank);
    if (r.rank == 3) {
      CHECK(r.state == muster::store::rank_state::failed);
      CHECK(r.exit_code == 3);
    } else {
      CHECK(r.state == muster::store::rank_state::killed);
      // stopped within a second of the failure, by the run store's clock (the launchers'
      // start-up, slow under the sanitizers and a loaded CI machine, is not part of the claim)
      CHECK(r.updated_ms - failed_ms < 1000);
    }
  }
  for (const auto& run : reader.runs()) CHECK(run.state == muster::store::run_state::failed);
}

TEST_CASE("a node that never arrives: the rendezvous times out naming it", "[launch]") {
  muster::test::temp_dir runs;
  const auto job = fresh_job_id();
  auto start = clock_type::now();
  auto r = muster::test::run_process(
      launch_args(runs.path(), {}, {"launch.timeout_rendezvous=1"}), step_env(job, 2, 1, 0));
  CHECK(clock_type::now() - start < 5s);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("1 of 2 nodes reached the rendezvous within 1 s. Arrived: "
                                    "gpu-a01 (node 0). Missing: gpu-a02 (node 1)"));
  CHECK_THAT(r.err, Catch::Contains("launch.timeout_rendezvous"));
  // and node 1 alone finds no store, saying where it looked
  auto lone = muster::test::run_process(
      launch_args(runs.path(), {}, {"launch.timeout_rendezvous=1"}), step_env(job, 2, 1, 1));
  CHECK(lone.exit_code != 0);
  CHECK_THAT(lone.err, Catch::Contains("no rendezvous store of job " + std::to_string(job)));
  CHECK_THAT(lone.err, Catch::Contains("Check that node 0's launcher (gpu-a01) is running"));
}

TEST_CASE("without a shared run directory node 1 finds the store on the derived port",
          "[launch]") {
  muster::test::temp_dir runs0, runs1;
  auto results = run_step(fresh_job_id(), 2, 1, launch_args(runs0.path(), {}),
                          launch_args(runs1.path(), {}));
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
  }
  muster::store::run_reader node1(muster::test::only_run_dir(runs1.path()));
  CHECK(node1.hosts() == std::vector<std::string>{"gpu-a02"});
  CHECK(has_event(node1.events(), "rendezvous", "(derived port"));
  muster::store::run_reader node0(muster::test::only_run_dir(runs0.path()));
  CHECK(has_event(node0.events(), "rendezvous", "2 nodes met through the store on 127.0.0.1:"));
}

TEST_CASE("launch.max_restarts restarts every node together", "[launch]") {
  muster::test::temp_dir runs;
  auto results = run_step(fresh_job_id(), 2, 1,
                          launch_args(runs.path(),
                                      {"--sleep-ms", "60000", "--only-rank", "1", "--after-ms",
                                       "100", "--exit-code", "7"},
                                      {"launch.max_restarts=1"}));
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 7);
    CHECK_THAT(r.err, Catch::Contains("restarting the ranks (1 of 1)"));
  }
  auto dir = muster::test::only_run_dir(runs.path());
  // rank 3's log holds both starts: restart 0, then restart 1
  auto lines = contract_lines(muster::test::read_file(dir / "logs" / "rank-3.log"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].restart == 0);
  CHECK(lines[1].restart == 1);
  muster::store::run_reader reader(dir);
  int restarts = 0;
  for (const auto& e : reader.events()) restarts += e.kind == "restart";
  CHECK(restarts == 2);  // one per node
}

// Two nodes' launchers with ranks running for a minute; `victim`'s launcher is killed with
// SIGKILL once all 4 ranks run. The other launcher's result, and how long it took to end.
struct survivor {
  fs::path dir;
  muster::test::process_result result;
  clock_type::duration took{};
};
survivor kill_launcher(const fs::path& runs, int victim) {
  const auto job = fresh_job_id();
  auto args = launch_args(runs, {"--sleep-ms", "60000"}, {"launch.kill_grace=5"});
  muster::test::child_process nodes[2] = {
      muster::test::spawn_process(args, step_env(job, 2, 1, 0)),
      muster::test::spawn_process(args, step_env(job, 2, 1, 1))};
  survivor s;
  try {
    s.dir = wait_for_ranks(runs, 4);
  } catch (...) {  // the ranks did not start: no launcher outlives the test
    for (const auto& n : nodes) {
      ::kill(n.pid, SIGKILL);
      muster::test::wait_process(n.pid);
      ::close(n.out_fd);
    }
    throw;
  }
  ::kill(nodes[victim].pid, SIGKILL);
  muster::test::wait_process(nodes[victim].pid);
  const auto start = clock_type::now();
  s.result = muster::test::wait_process(nodes[1 - victim].pid);
  s.took = clock_type::now() - start;
  for (const auto& n : nodes) ::close(n.out_fd);
  return s;
}

TEST_CASE("node 0's launcher killed with SIGKILL: node 1 stops its ranks and says why",
          "[launch]") {
  muster::test::temp_dir runs;
  const auto node1 = kill_launcher(runs.path(), 0);
  CHECK(node1.took < 2s);
  CHECK(node1.result.exit_code != 0);
  muster::store::run_reader reader(node1.dir);
  CHECK(has_event(reader.events(), "remote_failure", "lost the rendezvous store"));
}

TEST_CASE("node 1's launcher killed with SIGKILL: node 0 stops its ranks at once and says why",
          "[launch]") {
  muster::test::temp_dir runs;
  const auto node0 = kill_launcher(runs.path(), 1);
  CHECK(node0.took < 2s);  // not after a hang timeout
  CHECK(node0.result.exit_code == 1);
  const std::string gone = "the launcher on gpu-a02 (node 1) is gone";
  muster::store::run_reader reader(node0.dir);
  CHECK(has_event(reader.events(), "remote_failure", gone));
  CHECK(has_event(reader.events(), "first_failure_elsewhere", gone));
  for (const auto& rank : reader.ranks())
    if (rank.rank < 2) CHECK(rank.state == muster::store::rank_state::killed);
}

TEST_CASE("one srun task per rank: each task execs its worker as that rank", "[launch]") {
  muster::test::temp_dir runs;
  auto results = run_step(fresh_job_id(), 2, 2, launch_args(runs.path(), {}));
  std::set<int> ports;
  for (int task = 0; task < 4; ++task) {
    const auto& r = results[static_cast<std::size_t>(task)];
    INFO("task " << task << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    auto lines = contract_lines(r.out);  // the worker itself wrote to srun's stdout
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == muster::test::two_nodes_of_two(task, lines[0].port));
    ports.insert(lines[0].port);
  }
  CHECK(ports.size() == 1);
  muster::store::run_reader reader(muster::test::only_run_dir(runs.path()));
  CHECK(reader.ranks().size() == 4);
  CHECK(has_event(reader.events(), "exec", "rank 3 on gpu-a02 execs"));
}

TEST_CASE("bad input to muster launch is one clear line", "[launch]") {
  muster::test::temp_dir runs;
  auto outside = muster::test::run_process(launch_args(runs.path(), {}),
                                           {{}, {"SLURM_JOB_ID", "SLURM_STEP_ID"}});
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.err, Catch::Contains("muster launch runs inside a Slurm job step"));
  CHECK_THAT(outside.err, Catch::Contains("on one machine use muster run"));

  auto env = step_env(fresh_job_id(), 2, 1, 1);
  env.set["SLURMD_NODENAME"] = "gpu-b07";  // a host that is not in the step's nodelist
  auto stranger = muster::test::run_process(launch_args(runs.path(), {}), env);
  CHECK(stranger.exit_code == 2);
  CHECK_THAT(stranger.err, Catch::Contains("SLURMD_NODENAME=gpu-b07"));
  CHECK((!fs::exists(runs.path()) || fs::is_empty(runs.path())));
}

TEST_CASE("a launcher given fewer CPUs than its ranks says so at its start", "[launch]") {
  muster::test::temp_dir runs;
  auto args = launch_args(runs.path(), {"--sleep-ms", "10"});
  args.insert(args.begin(), {"taskset", "-c", "0"});  // as a Slurm task of one CPU
  const auto results = run_step(fresh_job_id(), 1, 1, args);
  REQUIRE(results.size() == 1);
  INFO("stderr: " << results[0].err);
  CHECK(results[0].exit_code == 0);
  CHECK_THAT(results[0].err,
             Catch::Contains("muster: warning: 1 CPU(s) for 2 ranks on gpu-a01 (this launcher's "
                             "affinity, its Slurm task's CPUs): the ranks share them") &&
                 Catch::Contains("slurm.cpus_per_task"));
  int said = 0;
  for (const auto& e : muster::store::run_reader(muster::test::only_run_dir(runs.path())).events())
    said += e.kind == "cpus";
  CHECK(said == 1);
}

TEST_CASE("after the pre-timeout SIGUSR1, node 0 requeues only a job whose ranks handled it",
          "[launch]") {
  muster::test::temp_dir runs, out;
  const auto job = fresh_job_id();
  // `handled`: the workers save for 50 ms and exit 138, as muster-train does; else they are
  // sleep(1), which the signal itself ends. No scontrol on PATH: the requeue asked for fails
  // with its reason, which the store records.
  const auto stop = [&](bool handled) {
    std::vector<std::string> args = {kMuster,
                                     "launch",
                                     "launch.runs_dir=" + (runs / (handled ? "a" : "b")).string(),
                                     "launch.master_addr=127.0.0.1",
                                     "launch.nproc=2",
                                     "launch.requeue_on_signal=true",
                                     "--"};
    if (handled)
      args.insert(args.end(), {kWorker, "--sleep-ms", "60000", "--stop-on-usr1", "50"});
    else
      args.insert(args.end(), {"/bin/sleep", "60"});
    std::vector<pid_t> launchers;
    for (int task = 0; task < 2; ++task) {
      auto env = step_env(handled ? job : job + 1, 2, 1, task);
      env.set["PATH"] = "/nonexistent";
      launchers.push_back(muster::test::spawn_logged(
          args, env, out / fmt::format("{}-{}.log", handled ? "a" : "b", task)));
    }
    const auto dir = wait_for_ranks(runs / (handled ? "a" : "b"), handled ? 4 : 0);
    // sleep writes nothing: wait for every rank's pid in the store
    for (const auto end = clock_type::now() + 10s;; std::this_thread::sleep_for(20ms)) {
      REQUIRE(clock_type::now() < end);
      std::vector<muster::store::rank_record> ranks;
      try {
        ranks = muster::store::run_reader(dir).ranks();
      } catch (const std::exception&) {
        continue;  // no node file yet
      }
      if (ranks.size() == 4 &&
          std::all_of(ranks.begin(), ranks.end(), [](const auto& r) { return r.pid; }))
        break;
    }
    for (const pid_t p : launchers) ::kill(p, SIGUSR1);  // srun passes it to every task
    std::vector<muster::test::process_result> ends;
    for (const pid_t p : launchers) ends.push_back(muster::test::wait_process(p));
    return std::make_pair(dir, ends);
  };

  const auto [refused_dir, refused] = stop(false);
  const auto said = muster::test::read_file(out / "b-0.log");
  INFO(said);
  CHECK(refused[0].exit_code == 128 + SIGUSR1);
  CHECK_THAT(said,
             Catch::Contains(fmt::format("muster: not requeueing job {} after SIGUSR1", job + 1)) &&
                 Catch::Contains("ended by the signal itself (no handler for it"));
  const auto events = muster::store::run_reader(refused_dir).events();
  CHECK(has_event(events, "requeue_refused", "ended by the signal itself"));
  CHECK_FALSE(has_event(events, "requeue", ""));
  const auto diagnosed = muster::test::run_process({kMuster, "diagnose", refused_dir.string()});
  CHECK_THAT(diagnosed.out, Catch::Contains(fmt::format("note: not requeueing job {}", job + 1)));
  const auto status = muster::test::run_process({kMuster, "status", refused_dir.string()});
  CHECK_THAT(status.out, Catch::Contains(fmt::format(
                             "\nrequeue   not requeueing job {} after SIGUSR1", job + 1)));

  const auto [asked_dir, asked] = stop(true);
  INFO(muster::test::read_file(out / "a-0.log"));
  CHECK(asked[0].exit_code == 128 + SIGUSR1);
  const auto asked_events = muster::store::run_reader(asked_dir).events();
  CHECK(has_event(asked_events, "requeue",
                  fmt::format("could not requeue job {} after SIGUSR1", job)));
  CHECK_FALSE(has_event(asked_events, "requeue_refused", ""));
}

TEST_CASE("a requeued start that began at the step the one before it did is not requeued again",
          "[launch]") {
  muster::test::temp_dir runs, out;
  const auto job = fresh_job_id();
  // Each start: 2 nodes of 2 ranks that report steps only in their heartbeat, from step 0
  // (they save nothing), stop on SIGUSR1 as asked; no scontrol on PATH.
  const auto start = [&](int restart) {
    std::vector<pid_t> launchers;
    for (int task = 0; task < 2; ++task) {
      auto env = step_env(job, 2, 1, task);
      env.set["PATH"] = "/nonexistent";
      if (restart > 0) {
        env.set["SLURM_RESTART_COUNT"] = std::to_string(restart);
        env.unset.erase(std::remove(env.unset.begin(), env.unset.end(), "SLURM_RESTART_COUNT"),
                        env.unset.end());
      }
      launchers.push_back(muster::test::spawn_logged(
          launch_args(runs.path(),
                      {"--heartbeat-ms", "50", "--steps", "1000", "--heartbeat-only", "--sleep-ms",
                       "60000", "--stop-on-usr1", "10"},
                      {"launch.requeue_on_signal=true"}),
          env, out / fmt::format("{}-{}.log", restart, task)));
    }
    const auto dir = wait_for_ranks(runs.path(), 4);
    // rank 0's first step said (its heartbeat), then the pre-timeout signal
    for (const auto end = clock_type::now() + 10s;; std::this_thread::sleep_for(20ms)) {
      REQUIRE(clock_type::now() < end);
      const auto said = muster::test::count_events(muster::store::run_reader(dir).events(),
                                                   "first_step", "(its heartbeat)");
      if (said == restart + 1) break;
    }
    for (const pid_t p : launchers) ::kill(p, SIGUSR1);
    for (const pid_t p : launchers) muster::test::wait_process(p);
    return dir;
  };
  const auto dir = start(0);
  auto events = muster::store::run_reader(dir).events();
  CHECK(has_event(events, "first_step",
                  "rank 0 had done 0 steps at its first report of this start (its heartbeat)"));
  CHECK(has_event(events, "requeue", "could not requeue"));  // asked for: nothing to compare
  start(1);
  events = muster::store::run_reader(dir).events();
  CHECK(has_event(events, "requeue_refused",
                  "rank 0 had done 0 steps at its first report of this start, and 0 in the "
                  "start before it"));
  CHECK_THAT(muster::test::read_file(out / "1-0.log"),
             Catch::Contains(fmt::format("muster: not requeueing job {} after SIGUSR1", job)));
}

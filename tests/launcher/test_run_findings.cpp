// What a run's store adds to muster diagnose (launcher/diagnose/run_findings.hpp): error files
// whose message or kind decides the category, hangs muster stopped, ranks killed or failed
// without an error file, and the per-rank analysis (stragglers, oldest heartbeat, memory peak).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "launcher/diagnose/run_findings.hpp"
#include "launcher/launcher_lines.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;
using namespace muster::launcher::diagnose;

namespace {

launcher::status::rank_status rank_of(std::int64_t rank, store::rank_state state,
                                      std::optional<std::int64_t> signal = std::nullopt,
                                      std::optional<std::int64_t> code = std::nullopt) {
  launcher::status::rank_status r;
  r.rank.rank = rank;
  r.rank.host = rank < 2 ? "node-a" : "node-b";
  r.rank.local_rank = rank % 2;
  r.rank.pid = 1000 + rank;
  r.rank.state = state;
  r.rank.signal = signal;
  r.rank.exit_code = code;
  return r;
}

// Steps 0..steps-1 of `rank` taking `seconds` each (step 0 ten times as long: start-up), of
// which `wait` blocked in collectives (NaN: not reported).
void add_steps(launcher::status::run_status& run, std::int64_t rank, int steps, double seconds,
               std::int64_t peak = 0, double wait = store::kNotReported) {
  for (int s = 0; s < steps; ++s) {
    store::step_record r;
    r.rank = rank;
    r.step = s;
    r.step_time_s = s == 0 ? seconds * 10 : seconds;
    r.peak_mem_bytes = peak;
    r.comm_wait_s = wait;
    run.history.push_back(r);
  }
}

}  // namespace

TEST_CASE("the store's error files decide the category by message, else by kind", "[diagnose]") {
  launcher::status::run_status run;
  run.dir = "/runs/r1";
  run.ranks = {rank_of(0, store::rank_state::killed), rank_of(1, store::rank_state::killed),
               rank_of(2, store::rank_state::failed, std::nullopt, 1),
               rank_of(3, store::rank_state::killed)};
  run.errors = {{1, 2, 4, "backward", "exception",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                 "has a total capacity of 79.15 GiB of which 1.00 GiB is free."}};
  diagnoser d(4);
  add_store_findings(d, run, {});
  auto result = d.finish();
  REQUIRE(result.failed());
  const auto& root = result.findings.front();
  CHECK(root.category == "cuda_oom");
  CHECK(root.ranks == std::set<int>{2});
  CHECK(root.hosts == std::set<std::string>{"node-b"});
  CHECK(root.facts.at("phase") == "backward");
  CHECK(root.facts.at("step") == "5");
  CHECK_THAT(root.summary, Catch::EndsWith(", in backward"));
  CHECK(root.evidence.front().file == "/runs/r1/node-*.db (errors)");
  CHECK(result.findings.size() == 1);  // the failed rank is said by its cause, once

  // the engine's own kinds, when the message says nothing the classifier knows
  run.errors = {{1, 2, std::nullopt, "startup", "oom", "cannot allocate the unit buffers"}};
  diagnoser by_kind(4);
  add_store_findings(by_kind, run, {});
  result = by_kind.finish();
  CHECK(result.findings.front().category == "cuda_oom");
  CHECK_THAT(result.findings.front().fixes[0], Catch::Contains("meta device"));
  run.errors = {{1, 2, 0, "data", "bad_input", "data.path /x: no such file"}};
  diagnoser plain(4);
  add_store_findings(plain, run, {});
  result = plain.finish();
  CHECK(result.findings.front().category == "worker_failed_see_error_file");
  CHECK_THAT(result.findings.front().summary, Catch::Contains("data.path /x: no such file"));
}

TEST_CASE("the store's hangs, kills and silent failures are findings", "[diagnose]") {
  launcher::status::run_status run;
  run.dir = "/runs/r2";
  run.ranks = {rank_of(0, store::rank_state::killed), rank_of(1, store::rank_state::failed, 6),
               rank_of(2, store::rank_state::killed)};
  const std::vector<store::event_record> events = {
      {5, std::nullopt, store::severity::info, "rendezvous", "127.0.0.1:29500"},
      {9, 1, store::severity::error, "hang", "rank 1 is hung: SIGABRT sent; last heartbeats: ..."}};
  diagnoser d(3);
  add_store_findings(d, run, events);
  auto result = d.finish();
  REQUIRE(result.failed());
  CHECK(result.findings.front().category == "hang_watchdog_stuck");
  CHECK(result.findings.front().ranks == std::set<int>{1});
  CHECK(result.findings.front().evidence.front().line == 2);
  CHECK(result.findings.size() == 1);  // the SIGABRT that stopped it is not another failure

  run.ranks[1] = rank_of(1, store::rank_state::failed, 9);
  diagnoser killed(3);
  add_store_findings(killed, run, {});
  result = killed.finish();
  CHECK(result.findings.front().category == "worker_killed_sigkill");
  CHECK(result.findings.front().evidence.front().text == "rank 1 on node-a ended by signal 9");

  run.ranks[1] = rank_of(1, store::rank_state::failed, std::nullopt, 3);
  diagnoser failed(3);
  add_store_findings(failed, run, {});
  result = failed.finish();
  CHECK(result.findings.front().category == "worker_failed_see_error_file");
  CHECK(result.findings.front().facts.at("exit_code") == "3");

  run.ranks[1] = rank_of(1, store::rank_state::succeeded, std::nullopt, 0);
  diagnoser clean(3);
  add_store_findings(clean, run, {});
  CHECK_FALSE(clean.finish().failed());
}

TEST_CASE("the rank analysis finds stragglers, the oldest heartbeat and the memory peak",
          "[diagnose]") {
  launcher::status::run_status run;
  for (int r = 0; r < 4; ++r) run.ranks.push_back(rank_of(r, store::rank_state::running));
  run.ranks[0].heartbeat_age_s = 1.0;
  run.ranks[1].heartbeat_age_s = 42.0;
  run.ranks[2].heartbeat_age_s = 2.0;
  add_steps(run, 0, 20, 1.00, 10 << 20);
  add_steps(run, 1, 20, 1.05, 12 << 20);
  add_steps(run, 2, 20, 1.19, 30 << 20);  // 6% above the median: within the noise allowed
  add_steps(run, 3, 20, 1.50, 11 << 20);  // 34% above it: a straggler
  const auto b = analyse_ranks(run, 64 << 20);
  CHECK(b.median_step_s == Approx((1.05 + 1.19) / 2));  // the median of the four medians
  CHECK(b.stragglers == std::vector<std::int64_t>{3});
  REQUIRE(b.ranks.size() == 4);
  CHECK(b.ranks[3].slower == Approx(1.50 / 1.12 - 1));
  CHECK(b.ranks[3].host == "node-b");
  CHECK(b.ranks[3].steps == 19);  // step 0 (start-up) is left out
  CHECK(b.ranks[3].median_step_s == Approx(1.50));
  CHECK_FALSE(b.ranks[2].straggler);
  CHECK(b.oldest_heartbeat_rank == 1);
  CHECK(b.oldest_heartbeat_age_s == 42.0);
  CHECK(b.peak_mem_bytes == (30 << 20));
  CHECK(b.peak_mem_rank == 2);
  CHECK(b.planned_mem_bytes == (64 << 20));
  CHECK(b.peak_mem_device.empty());  // the steps did not say what they measured
  CHECK(memory_words(b) ==
        "measured peak 30.00 MiB on rank 2; the planner estimated 64.00 MiB a GPU");
  // what the peak rank's steps measured is named, and a CPU's estimate is a rank's
  for (auto& s : run.history) s.mem_device = "cuda";
  CHECK(memory_words(analyse_ranks(run, 64 << 20)) ==
        "measured peak 30.00 MiB on rank 2 (GPU memory PyTorch's allocator reserved); the "
        "planner estimated 64.00 MiB a GPU");
  for (auto& s : run.history) s.mem_device = "cpu";
  const auto cpu = analyse_ranks(run, 0);
  CHECK(cpu.peak_mem_device == "cpu");
  CHECK(memory_words(cpu) == "measured peak 30.00 MiB on rank 2 (resident memory, on the CPU)");
  CHECK(memory_words(analyse_ranks(run, 8 << 20)) ==
        "measured peak 30.00 MiB on rank 2 (resident memory, on the CPU); the planner estimated "
        "8.00 MiB of a rank's tensors (resident memory also holds the program, LibTorch and the "
        "allocator's cache, so the two do not compare on the CPU)");
  CHECK(memory_words(analyse_ranks({}, 0)).empty());
  // no step measured, on ranks the launchers gave no GPU: the estimate is a CPU rank's
  auto unmeasured = analyse_ranks({}, 8 << 20);
  CHECK(memory_words(unmeasured) == "the planner estimated 8.00 MiB a GPU");
  unmeasured.peak_mem_device = "cpu";
  CHECK(memory_words(unmeasured) ==
        "the planner estimated 8.00 MiB of a rank's tensors, on the CPU");
}

TEST_CASE("the launchers' devices events say whether every node's ranks ran without a GPU",
          "[diagnose]") {
  using muster::launcher::kNoGpuSaid;
  using muster::launcher::ran_without_gpus;
  const auto devices = [](std::string message) {
    return store::event_record{1, std::nullopt, store::severity::info, "devices", message};
  };
  CHECK_FALSE(ran_without_gpus({}));  // an older muster said nothing
  CHECK(ran_without_gpus({devices(std::string(kNoGpuSaid))}) == true);
  CHECK(ran_without_gpus({devices(std::string(kNoGpuSaid)),
                          devices("each rank sees its GPU alone (CUDA_VISIBLE_DEVICES): rank 2 "
                                  "GPU 0")}) == false);
}

TEST_CASE("in synchronous training the straggler is the rank that waits least", "[diagnose]") {
  launcher::status::run_status run;
  for (int r = 0; r < 4; ++r) run.ranks.push_back(rank_of(r, store::rank_state::running));
  // every step takes 1 s everywhere; rank 2 computes for 0.9 s while the others wait 0.5 s
  add_steps(run, 0, 20, 1.0, 0, 0.5);
  add_steps(run, 1, 20, 1.0, 0, 0.5);
  add_steps(run, 2, 20, 1.0, 0, 0.1);
  add_steps(run, 3, 20, 1.0, 0, 0.5);
  const auto a = analyse_ranks(run, 0);
  CHECK(a.by_busy);
  CHECK(a.median_step_s == Approx(1.0));
  CHECK(a.median_busy_s == Approx(0.5));
  CHECK(a.stragglers == std::vector<std::int64_t>{2});
  CHECK(a.ranks[2].median_busy_s == Approx(0.9));
  CHECK(a.ranks[2].slower == Approx(0.8));
  // one rank that does not report its waits: step times decide, and find no straggler
  run.history.erase(std::remove_if(run.history.begin(), run.history.end(),
                                   [](const store::step_record& s) { return s.rank == 3; }),
                    run.history.end());
  add_steps(run, 3, 20, 1.0);
  const auto b = analyse_ranks(run, 0);
  CHECK_FALSE(b.by_busy);
  CHECK(std::isnan(b.median_busy_s));
  CHECK(b.stragglers.empty());
}

TEST_CASE("a rank that failed first before a restart is a finding, though the ranks table moved on",
          "[diagnose]") {
  launcher::status::run_status run;
  run.dir = "/runs/r3/";
  // the restarted attempt finished; its collective error of the first attempt stays
  run.ranks = {rank_of(0, store::rank_state::succeeded), rank_of(1, store::rank_state::succeeded)};
  run.errors = {{3, 0, 14, "forward", "collective_timeout",
                 "[rank 0/2 group ep0] all_to_all seq=310 bytes=2719744 failed after 62 ms "
                 "(timeout 600000 ms); not arrived: rank 1 (at seq 309) (Connection reset by "
                 "peer)"}};
  const std::vector<store::event_record> events = {
      {2, 1, store::severity::error, "first_failure",
       "rank 1 on node-a (pid 777) failed first: signal 9 (SIGKILL); last output: step 14"},
      {4, 0, store::severity::info, "knock_on", "rank 0 stopped after the first failure"},
      {5, std::nullopt, store::severity::warn, "restart", "restart 1 of 1 after rank 1 ..."}};
  diagnoser d(2);
  add_store_findings(d, run, events);
  auto result = d.finish();
  REQUIRE(result.findings.size() == 2);
  const auto& root = result.findings.front();
  CHECK(root.category == "worker_killed_sigkill");
  CHECK(root.ranks == std::set<int>{1});
  CHECK(root.facts.at("pid") == "777");
  CHECK_THAT(root.summary, Catch::StartsWith("rank 1 on node-a, before the run restarted, was "
                                             "killed with SIGKILL (signal 9) (pid 777)"));
  CHECK(root.evidence.front().file == "/runs/r3/node-*.db (events)");  // no such file here
  CHECK(root.evidence.front().line == 1);
  CHECK(result.findings[1].category == "nccl_timeout_cascade");

  // an exit code, with no error file, is a failure of its own
  auto exited = events;
  exited[0].message = "rank 1 on node-a (pid 777) failed first: exit code 3; last output: x";
  diagnoser by_code(2);
  add_store_findings(by_code, run, exited);
  result = by_code.finish();
  CHECK(result.findings.front().category == "worker_failed_see_error_file");
  CHECK(result.findings.front().facts.at("exit_code") == "3");

  // where the ranks table still shows that process failed, it is one finding, said once
  run.ranks[1] = rank_of(1, store::rank_state::failed, 9);
  run.ranks[1].rank.pid = 777;
  diagnoser same(2);
  add_store_findings(same, run, events);
  result = same.finish();
  CHECK(result.findings.front().category == "worker_killed_sigkill");
  CHECK(result.findings.front().count == 1);
  CHECK_THAT(result.findings.front().summary, !Catch::Contains("restarted"));
}

TEST_CASE("the store's evidence names the run's node file where it has only one", "[diagnose]") {
  muster::test::temp_dir dir;
  launcher::status::run_status run;
  run.dir = dir.path() / "run-1";
  std::filesystem::create_directories(run.dir);
  muster::test::write_file(run.dir / "node-node-a.db", "");
  run.ranks = {rank_of(0, store::rank_state::killed), rank_of(1, store::rank_state::failed, 9)};
  diagnoser d(2);
  add_store_findings(d, run, {});
  const auto result = d.finish();
  REQUIRE(result.failed());
  CHECK(result.findings.front().evidence.front().file ==
        (run.dir / "node-node-a.db").string() + " (ranks)");
  // several: the rows are counted over them all, so the pattern
  muster::test::write_file(run.dir / "node-node-b.db", "");
  diagnoser two(2);
  add_store_findings(two, run, {});
  CHECK(two.finish().findings.front().evidence.front().file ==
        (run.dir / "node-*.db").string() + " (ranks)");
}

TEST_CASE("a lost run's gone ranks died with their launcher", "[diagnose]") {
  launcher::status::run_status run;
  run.dir = "/runs/r4";
  run.ranks = {rank_of(0, store::rank_state::running), rank_of(1, store::rank_state::running)};
  run.ranks[0].gone = run.ranks[1].gone = true;
  diagnoser quiet(2);
  add_store_findings(quiet, run, {});
  CHECK_FALSE(quiet.finish().failed());  // not lost (another host's view): nothing to say
  run.lost = true;
  diagnoser d(2);
  add_store_findings(d, run, {});
  const auto result = d.finish();
  REQUIRE(result.findings.size() == 1);
  const auto& f = result.findings.front();
  CHECK(f.category == "worker_killed_sigkill");
  CHECK(f.ranks == std::set<int>{0, 1});
  CHECK_THAT(f.summary, Catch::StartsWith("rank 0, 1 on node-a died with the run's launcher"));
  CHECK(f.evidence.front().text == "rank 0 on node-a recorded running; no process has pid 1000");
  CHECK_THAT(f.fixes.front(), Catch::Contains("killed the launcher"));
}

TEST_CASE("a rank that raised quotes its exception, and its fix names the rank's log",
          "[diagnose]") {
  launcher::status::run_status run;
  run.dir = "/runs/r5";
  run.ranks = {rank_of(0, store::rank_state::killed),
               rank_of(1, store::rank_state::failed, std::nullopt, 1)};
  diagnoser d(2);
  d.set_srun_tasks(diagnoser::srun_tasks::launchers);
  add_store_findings(d, run, {});
  // as a run of `python3 train.py` under muster launch leaves them (the lines the reader keeps):
  // the rank's own log, then Slurm's output, where the launcher repeats the rank's last lines
  const std::string log = "/runs/r5/logs/rank-1.log";
  d.add_line(log, 2, "Traceback (most recent call last):", 1);
  d.add_line(log, 4, "    raise RuntimeError(\"boom\")", 1);
  d.add_line(log, 5, "RuntimeError: boom", 1);
  std::int64_t n = 0;
  for (const char* line :
       {"muster: rank 1 failed first (exit code 1); 0 other rank(s) stopped. Log: "
        "/runs/r5/logs/rank-1.log",
        "  [rank 1] Traceback (most recent call last):", "  [rank 1] RuntimeError: boom",
        "srun: error: node-a: task 0: Exited with exit code 1",
        "srun: error: node-b: task 1: Exited with exit code 1"})
    d.add_line("/runs/r5/slurm.out", ++n, line);
  const auto result = d.finish();
  REQUIRE(result.failed());
  const auto& root = result.findings.front();
  CHECK(root.category == "worker_failed_see_error_file");
  CHECK(root.ranks == std::set<int>{1});
  CHECK(root.summary == "rank 1 on node-a failed with exit code 1: RuntimeError: boom");
  CHECK(root.facts.at("error") == "RuntimeError: boom");
  REQUIRE_FALSE(root.evidence.empty());
  CHECK(root.evidence.front().file == log);  // the rank's own log, not Slurm's copy
  CHECK(root.evidence.front().line == 5);
  REQUIRE_FALSE(root.fixes.empty());
  CHECK_THAT(root.fixes.front(), Catch::Contains(log + ", from line 2"));
  for (const auto& fix : root.fixes) CHECK_THAT(fix, !Catch::Contains("@record"));
}

TEST_CASE("a resumed attempt's first step is start-up work too, not a straggler's sign",
          "[diagnose]") {
  launcher::status::run_status run;
  for (int r = 0; r < 2; ++r) run.ranks.push_back(rank_of(r, store::rank_state::running));
  add_steps(run, 0, 10, 1.0);
  add_steps(run, 1, 10, 1.0);
  for (auto& s : run.history) s.step += 17;  // resumed from the checkpoint of step 17
  const auto a = analyse_ranks(run, 0);
  REQUIRE(a.ranks.size() == 2);
  for (const auto& r : a.ranks) {
    CHECK(r.steps == 9);  // step 17, ten times as long, is left out
    CHECK(r.p90_step_s == Approx(1.0));
  }
  // requeued in the same run: steps 0-9 of the first attempt, then 5-9 again from the second
  // (the store keeps each step's newest), whose first, step 5, loaded the checkpoint
  launcher::status::run_status requeued;
  requeued.ranks.push_back(rank_of(0, store::rank_state::running));
  for (int step = 0; step < 10; ++step) {
    store::step_record r;
    r.step = step;
    const bool again = step >= 5;
    r.time_ms = again ? 9000 + step : 1000 + step;
    r.step_time_s = step == 0 || step == 5 ? 10.0 : 1.0;
    requeued.history.push_back(r);
  }
  requeued.attempt_starts = {8000};
  const auto b = analyse_ranks(requeued, 0);
  REQUIRE(b.ranks.size() == 1);
  CHECK(b.ranks[0].steps == 8);  // steps 0 and 5 left out
  CHECK(b.ranks[0].p90_step_s == Approx(1.0));
}

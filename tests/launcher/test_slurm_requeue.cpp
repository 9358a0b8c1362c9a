// The check before node 0 requeues a job after the pre-timeout signal
// (launcher/slurm_requeue.hpp): a requeue that would only train the same steps again is not
// asked for. On run stores written by the real node writer and steps files as workers write
// them.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "common/step_line.hpp"
#include "launcher/slurm_requeue.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;
using muster::launcher::read_requeue_history;
using muster::launcher::requeue_in_vain;

namespace {

// rank 0's steps `from` .. `to` - 1, one a second from `time_ms`, appended to its steps file
void train(const store::run_paths& paths, std::int64_t from, std::int64_t to,
           store::epoch_ms time_ms) {
  std::ofstream out(paths.rank_steps_file(0), std::ios::app);
  for (auto step = from; step < to; ++step) {
    store::step_record s{0, step, 2.5, 512, 1.0, 0, time_ms + (step - from) * 1000};
    out << format_step_line(s);
  }
}

// A run of two ranks whose starts began at `starts` (ms) and trained from the step in
// `first_steps` for 10 steps each; every start but the last ended in a requeue event.
store::run_paths run_of_starts(const std::filesystem::path& runs,
                               const std::vector<store::epoch_ms>& starts,
                               const std::vector<std::int64_t>& first_steps) {
  store::run_paths paths(runs, "pt-42");
  paths.create();
  store::node_writer db(paths.node_db("gpu-a01"));
  for (int r = 0; r < 2; ++r)
    db.put_rank({r, "gpu-a01", r, 100 + r, store::rank_state::killed, 138, std::nullopt,
                 starts.back() + 60000});
  for (std::size_t i = 0; i < starts.size(); ++i) {
    train(paths, first_steps[i], first_steps[i] + 10, starts[i] + 5000);
    if (i + 1 < starts.size())
      db.add_event({starts[i] + 50000, std::nullopt, store::severity::warn, "requeue",
                    "requeued job 42 after SIGUSR1, seen first on gpu-a01 (scontrol requeue: "
                    "ok)"});
  }
  return paths;
}

}  // namespace

TEST_CASE("a requeue goes ahead on the first start, and after a start that got further",
          "[requeue]") {
  muster::test::temp_dir runs;
  SECTION("the first start: nothing to compare with") {
    const auto paths = run_of_starts(runs.path(), {100000}, {0});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 100000)));
  }
  SECTION("the second start resumed after the first one's checkpoint") {
    const auto paths = run_of_starts(runs.path(), {100000, 200000}, {0, 10});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 200000)));
  }
  SECTION("a third start that resumed further than the second") {
    const auto paths = run_of_starts(runs.path(), {100000, 200000, 300000}, {0, 0, 9});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 300000)));
  }
  SECTION("a program that reports no steps: nothing tells") {
    store::run_paths paths(runs.path(), "pt-42");
    paths.create();
    store::node_writer db(paths.node_db("gpu-a01"));
    db.put_rank({0, "gpu-a01", 0, 100, store::rank_state::killed, 138, std::nullopt, 100000});
    db.add_event({50000, std::nullopt, store::severity::warn, "requeue", "requeued job 42"});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 100000)));
  }
}

TEST_CASE("a start that began where the one before it did is not requeued again", "[requeue]") {
  muster::test::temp_dir runs;
  SECTION("both from the first step: the program saves nothing") {
    const auto paths = run_of_starts(runs.path(), {100000, 200000}, {0, 0});
    const auto why = requeue_in_vain(read_requeue_history(paths, 200000));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("this start began at step 1, as the start before it did "
                                     "(step 1)") &&
                         Catch::Contains("would train the same steps again"));
  }
  SECTION("the third start resumed from the checkpoint the second one did") {
    // start 0 saved step 9 (start 1 began at step 10), start 1 saved nothing
    const auto paths = run_of_starts(runs.path(), {100000, 200000, 300000}, {0, 10, 10});
    const auto why = requeue_in_vain(read_requeue_history(paths, 300000));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("began at step 11, as the start before it did (step 11)"));
  }
}

TEST_CASE("ranks the pre-timeout signal itself ended saved nothing: no requeue", "[requeue]") {
  muster::test::temp_dir runs;
  for (const int signal : {SIGUSR1, SIGUSR2}) {
    store::run_paths paths(runs.path(), "pt-" + std::to_string(signal));
    paths.create();
    store::node_writer db(paths.node_db("gpu-a01"));
    db.put_rank({0, "gpu-a01", 0, 100, store::rank_state::killed, std::nullopt, 15, 100000});
    db.put_rank({1, "gpu-a01", 1, 101, store::rank_state::killed, std::nullopt, signal, 100000});
    db.put_rank({2, "gpu-a01", 2, 102, store::rank_state::killed, std::nullopt, signal, 100000});
    const auto why = requeue_in_vain(read_requeue_history(paths, 50000));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::StartsWith("rank(s) 1, 2 ended by the signal itself: the program has "
                                       "no handler for it, so it saved no checkpoint") &&
                         Catch::Contains("slurm.requeue = false"));
  }
}

// The check before node 0 requeues a job after the pre-timeout signal
// (launcher/slurm_requeue.hpp): a requeue that would only train the same steps again is not
// asked for. On run stores written by the real node writer, with the first_step events the
// launchers write.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/slurm_requeue.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;
using muster::launcher::read_requeue_history;
using muster::launcher::requeue_in_vain;

namespace {

// A run of two ranks whose starts began at `starts` (ms), rank 0's first step of each (from 1)
// in `first_steps`, said as node_run says it; every start but the last ended in a requeue.
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
    db.add_event({starts[i] + 5000, 0, store::severity::info, "first_step",
                  fmt::format("{}{} steps at its first report of this start (its heartbeat)",
                              launcher::kFirstStepSaid, first_steps[i])});
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
    const auto paths = run_of_starts(runs.path(), {100000}, {1});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 100000)));
  }
  SECTION("the second start resumed after the first one's checkpoint") {
    const auto paths = run_of_starts(runs.path(), {100000, 200000}, {1, 11});
    CHECK_FALSE(requeue_in_vain(read_requeue_history(paths, 200000)));
  }
  SECTION("a third start that resumed further than the second") {
    const auto paths = run_of_starts(runs.path(), {100000, 200000, 300000}, {1, 1, 10});
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
    const auto paths = run_of_starts(runs.path(), {100000, 200000}, {1, 1});
    const auto why = requeue_in_vain(read_requeue_history(paths, 200000));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::StartsWith("rank 0 had done 1 steps at its first report of this "
                                       "start, and 1 in the start before it") &&
                         Catch::Contains("would train the same steps again"));
  }
  SECTION("the third start resumed from the checkpoint the second one did") {
    // start 0 saved step 10 (start 1 began at step 11), start 1 saved nothing
    const auto paths = run_of_starts(runs.path(), {100000, 200000, 300000}, {1, 11, 11});
    const auto why = requeue_in_vain(read_requeue_history(paths, 300000));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::StartsWith("rank 0 had done 11 steps at its first report of this "
                                       "start, and 11 in the start before it"));
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
    CHECK_THAT(*why, Catch::StartsWith("rank(s) 1, 2 ended by the signal itself (no handler for "
                                       "it, or none yet: still starting), so they saved no "
                                       "checkpoint") &&
                         Catch::Contains("slurm.requeue = false"));
  }
}

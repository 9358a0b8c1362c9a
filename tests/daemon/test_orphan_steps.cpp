// Steps whose launcher is gone (daemon/orphan_steps.hpp), against real processes and a real
// node store: a dead launcher's step is closed, a live one's stays running, a reused pid is
// another process.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "common/run_store_records.hpp"
#include "daemon/node_store.hpp"
#include "daemon/orphan_steps.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::daemon;

namespace {

// The pid of a launcher that has ended: a real process, waited for.
pid_t ended_launcher() {
  const auto gone = muster::test::spawn_process({"true"});
  muster::test::wait_process(gone.pid);
  ::close(gone.out_fd);
  return gone.pid;
}

}  // namespace

TEST_CASE("a running step whose launcher is gone is closed, a live launcher's stays",
          "[orphan_steps]") {
  muster::test::temp_dir dir;
  node_store store(dir / "musterd.db", 90);
  const auto now = muster::store::now_ms();
  const pid_t gone = ended_launcher();
  store.step_started({"local-1", "0", 0, gone, "/runs/a", 2, "running", now - 1000, {}, {}, ""});
  // this test process: alive, started before its step
  store.step_started({"local-2", "0", 0, ::getpid(), "/runs/b", 2, "running", now, {}, {}, ""});
  // alive, but started after the step it is said to be the launcher of: a reused pid
  store.step_started(
      {"local-3", "0", 0, ::getpid(), "/runs/c", 2, "running", now - 86'400'000, {}, {}, ""});

  CHECK(close_orphan_steps(store, now + 5) == 2);
  const auto first = store.steps_of("local-1");
  REQUIRE(first.size() == 1);
  CHECK(first[0].state == "cancelled");
  CHECK(first[0].ended_ms == now + 5);
  CHECK_THAT(first[0].message, Catch::Contains("its launcher (pid " + std::to_string(gone) +
                                               ") was gone without recording the step's end"));
  CHECK(store.steps_of("local-2")[0].state == "running");
  CHECK(store.steps_of("local-3")[0].state == "cancelled");
  CHECK(close_orphan_steps(store, now + 10) == 0);  // nothing more to close
}

TEST_CASE("a closed step's end is its run store's last write, where one dates it",
          "[orphan_steps]") {
  muster::test::temp_dir dir;
  node_store store(dir / "musterd.db", 90);
  const auto now = muster::store::now_ms();
  const pid_t gone = ended_launcher();
  // the run's node file, last written 60 s after the step started, found an hour later
  const auto run = dir / "run";
  std::filesystem::create_directory(run);
  muster::test::write_file(run / "node-n1.db", "x");
  const auto written = now - 3'540'000;
  std::filesystem::last_write_time(
      run / "node-n1.db", std::chrono::file_clock::from_sys(std::chrono::system_clock::time_point(
                              std::chrono::milliseconds(written))));
  store.step_started(
      {"local-1", "0", 0, gone, run.string(), 1, "running", now - 3'600'000, {}, {}, ""});
  store.step_started(
      {"local-2", "0", 0, gone, (dir / "none").string(), 1, "running", now - 1000, {}, {}, ""});
  CHECK(close_orphan_steps(store, now) == 2);
  const auto dated = store.steps_of("local-1")[0];
  CHECK(dated.ended_ms == written);
  CHECK_THAT(dated.message, Catch::Contains("its end is its run store's last write, 3540 s "
                                            "before musterd found it"));
  const auto undated = store.steps_of("local-2")[0];
  CHECK(undated.ended_ms == now);
  CHECK_THAT(undated.message, Catch::Contains("its end is when musterd found it"));
}

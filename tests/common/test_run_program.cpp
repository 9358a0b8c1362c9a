// run_program: real helper programs (sh, true, sleep), their output, exit codes and time limit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include "common/run_program.hpp"

using namespace std::chrono_literals;
using muster::run_program;

TEST_CASE("run_program returns a program's stdout and stderr together and its exit code",
          "[run_program]") {
  auto r = run_program({"sh", "-c", "echo out; echo err >&2; exit 3"}, 5s);
  CHECK(r.started);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 3);
  CHECK_FALSE(r.ok());
  CHECK(r.output == "out\nerr");
  CHECK(run_program({"true"}, 5s).ok());
}

TEST_CASE("run_program adds extra environment variables, replacing one of the same name",
          "[run_program]") {
  auto r = run_program({"sh", "-c", "echo \"$HOME|$MUSTER_TEST_EXTRA\""}, 5s,
                       {"HOME=/elsewhere", "MUSTER_TEST_EXTRA=1"});
  CHECK(r.ok());
  CHECK(r.output == "/elsewhere|1");
}

TEST_CASE("run_program kills a program that outlives its time limit", "[run_program]") {
  const auto start = std::chrono::steady_clock::now();
  auto r = run_program({"sleep", "30"}, 200ms);
  CHECK(r.started);
  CHECK(r.timed_out);
  CHECK(r.exit_code == -1);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("run_program says why a program could not be started", "[run_program]") {
  auto r = run_program({"muster-no-such-program"}, 5s);
  CHECK_FALSE(r.started);
  CHECK(r.why_not == "muster-no-such-program: No such file or directory");
  CHECK_FALSE(run_program({}, 5s).started);
}

TEST_CASE("run_program kills a program that closed its output but does not exit", "[run_program]") {
  const auto start = std::chrono::steady_clock::now();
  auto r = run_program({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, 300ms);
  CHECK(r.timed_out);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("run_program's program gets no descriptor but its output", "[run_program]") {
  auto r = run_program({"sh", "-c", "ls /proc/self/fd"}, 5s);
  REQUIRE(r.ok());
  // 0, 1, 2 and the descriptor ls reads the directory through
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 3);
}

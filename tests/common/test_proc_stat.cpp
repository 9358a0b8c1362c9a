// proc_stat: a real process's state and start time from /proc, a zombie, a pid that is gone and a
// process that started after the time it is asked about (a reused pid).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "common/proc_stat.hpp"
#include "common/run_store_records.hpp"

using muster::process_started_by;
using muster::read_proc_stat;

TEST_CASE("read_proc_stat gives this process's state and a start time before now", "[proc_stat]") {
  const auto now = muster::store::now_ms();
  const auto self = read_proc_stat(::getpid());
  REQUIRE(self);
  CHECK(self->state == 'R');
  CHECK(self->started_ms > 0);
  CHECK(self->started_ms <= now + 1000);
  CHECK(self->started_ms > now - 86'400'000LL * 365);
  CHECK_FALSE(read_proc_stat(0));
  CHECK_FALSE(read_proc_stat(::getpid(), "/nonexistent-proc"));
}

TEST_CASE(
    "process_started_by tells a process from a later one of the same pid, and from a "
    "zombie or a gone one",
    "[proc_stat]") {
  const auto now = muster::store::now_ms();
  CHECK(process_started_by(::getpid(), now));
  CHECK_FALSE(process_started_by(::getpid(), now - 86'400'000));  // started a day later

  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  // not yet waited for: a zombie once it has exited
  for (int i = 0; i < 500; ++i) {
    const auto s = read_proc_stat(child);
    if (s && s->state == 'Z') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(read_proc_stat(child));
  CHECK(read_proc_stat(child)->state == 'Z');
  CHECK_FALSE(process_started_by(child, now + 1000));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_FALSE(read_proc_stat(child));
  CHECK_FALSE(process_started_by(child, now + 1000));
}

TEST_CASE("stopped_groups finds a stopped process anywhere in a process group, not only its leader",
          "[proc_stat]") {
  // a group leader (a wrapper script) that waits for its child (the program), which stops itself
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t program = ::fork();
    if (program == 0) {
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(program, &status, 0);
    ::_exit(0);
  }
  REQUIRE(leader > 0);
  ::setpgid(leader, leader);  // as the child does: either may run first
  // a group of its own with nothing stopped: this test process's
  const auto self = static_cast<std::int64_t>(::getpgrp());
  std::set<std::int64_t> stopped;
  for (int i = 0; i < 500 && stopped.empty(); ++i) {
    stopped = muster::stopped_groups({leader, self});
    if (stopped.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(stopped == std::set<std::int64_t>{leader});
  CHECK(read_proc_stat(leader)->pgrp == leader);
  CHECK_FALSE(read_proc_stat(leader)->stopped());  // the leader waits; its child is stopped
  CHECK(muster::stopped_groups({}).empty());
  ::kill(-leader, SIGCONT);
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(muster::stopped_groups({leader}).empty());
}

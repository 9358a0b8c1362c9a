// proc_stat: a real process's state and start time from /proc, a zombie, a pid that is gone and a
// process that started after the time it is asked about (a reused pid).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

// Running a short-lived helper program (scontrol) and taking its output: started with an argv
// through posix_spawnp (PATH lookup, never a shell), stdout and stderr captured together, killed
// when it outlives its time limit. For programs muster waits on, not for workers (those are
// launcher/worker_process.hpp).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace muster {

struct program_result {
  bool started = false;    // false: it could not be started (why_not says why)
  bool timed_out = false;  // it was killed (SIGKILL) after the time limit
  int exit_code = -1;      // its exit status; -1 when it did not exit normally
  std::string output;      // stdout and stderr, trailing newlines and spaces removed
  std::string why_not;     // why it could not be started ("scontrol: No such file or directory")
  int spawn_errno = 0;     // with why_not: the errno of the failed start (ENOENT: not installed)
  bool ok() const { return started && !timed_out && exit_code == 0; }
};

// Runs argv[0] (looked up in PATH when it has no '/') with argv[1..], this process's environment
// plus `extra_env` ("NAME=value", replacing a variable of the same name), stdin from /dev/null,
// no other descriptor of this process, and waits for it (output and exit) at most `timeout`.
// Blocks; never throws for the program's failures.
program_result run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           const std::vector<std::string>& extra_env = {});

}  // namespace muster

// Starting one worker process the way the supervisor needs it: its own process group (so a
// signal reaches everything it started), PR_SET_PDEATHSIG=SIGKILL (a launcher killed with
// SIGKILL leaves no worker behind), stdin from /dev/null, stdout and stderr into one pipe the
// supervisor reads, signals unblocked and at their defaults. fork + execve with an argv and an
// environment: never a shell.
// Not here: waiting for it and deciding what to do when it ends (supervisor.hpp).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "launcher/slurm_step.hpp"

namespace muster::launcher {

struct worker_spec {
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] is searched on the worker's PATH when it has no '/'
  env_map env;                    // the worker's whole environment
  std::vector<int> cpus;          // its CPU affinity; empty = the launcher's
};

struct spawned_worker {
  pid_t pid = -1;      // also its process group id
  int output_fd = -1;  // read end of the pipe with its stdout and stderr (close-on-exec)
};

// The file argv[0] names, as execvp would find it on `path` (the worker's PATH; the default
// "/usr/local/bin:/usr/bin:/bin" when empty). Throws errc::invalid_input naming the command
// and the fix when it is not found or not executable.
std::filesystem::path find_executable(const std::string& command, const std::string& path);

// Starts the worker. Throws errc::invalid_input when the program cannot be executed (the
// message names it and the reason) and errc::io when the system refuses a pipe or a fork.
// The caller owns output_fd and must reap pid.
spawned_worker spawn_worker(const worker_spec& spec);

}  // namespace muster::launcher

// Start real programs from tests with posix_spawn and an argv (never a shell), and collect
// what they print and how they ended.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace muster::test {

struct process_result {
  int exit_code = -1;  // the exit status when the process exited, else -1
  int signal = 0;      // the signal that ended it, else 0
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr
};

// Environment changes for a child: a value sets the variable; std::nullopt-like removal is
// spelled with the key in `unset`.
struct env_change {
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
};

// Runs argv[0] (searched on PATH when it has no '/'), feeds `input` to its stdin, waits for it
// and returns its output. Throws std::runtime_error when it cannot be started.
process_result run_process(const std::vector<std::string>& argv, const env_change& env = {},
                           const std::string& input = {});

// As run_process, with stdout on a terminal (a pseudo-terminal whose output this reads, without
// the terminal's "\n" -> "\r\n"): what a program prints for a person at a terminal.
process_result run_in_terminal(const std::vector<std::string>& argv, const env_change& env = {});

// A child left running, its stdout readable through out_fd (non-blocking off).
struct child_process {
  pid_t pid = -1;
  int out_fd = -1;
};

// Starts argv with stdout on a pipe (stderr inherited), and returns once the program's
// environment shows in /proc/<pid>/environ (or it has ended). Throws when it cannot be started.
child_process spawn_process(const std::vector<std::string>& argv, const env_change& env = {});

// Waits for pid and fills exit_code/signal of a result.
process_result wait_process(pid_t pid);

// Starts argv in the background with stdin from /dev/null and stdout and stderr appended to
// `log` (created when missing): a daemon, or a command whose output is read afterwards. The
// caller waits for the pid (wait_process / try_wait_process). It is killed (SIGKILL) when the
// thread that started it ends, so start it from the test's main thread: a test process that
// aborts takes its daemons with it (what they started themselves, such as slurmstepd and a
// job's processes, is not their child and ends on its own). Throws when it cannot be started or
// `log` cannot be opened.
pid_t spawn_logged(const std::vector<std::string>& argv, const env_change& env,
                   const std::filesystem::path& log);

// Does not block: the result (exit_code/signal) when pid has ended and is reaped now, else
// std::nullopt while it runs. Throws when pid is not a child of this process.
std::optional<process_result> try_wait_process(pid_t pid);

// A child process held stopped (SIGSTOP, as a debugger holds a rank) for as long as this lives;
// killed and reaped then. Throws when it cannot be started.
class stopped_child {
 public:
  stopped_child();
  ~stopped_child();
  stopped_child(const stopped_child&) = delete;
  stopped_child& operator=(const stopped_child&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace muster::test

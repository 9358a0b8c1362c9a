// Supervising the workers of one node: start them, copy their output to per-rank logs and the
// console, and stop them all quickly when one fails or the launcher is told to stop.
//
// Contract:
// - Fail fast: when a worker exits non-zero or by a signal, every other worker's process group
//   gets SIGTERM at once and SIGKILL after kill_grace. The first such worker is the first
//   failure; every worker that ends after that is a knock-on.
// - Signals to the launcher: SIGTERM, SIGINT and SIGHUP are forwarded to every worker's group,
//   then grace, then SIGKILL (a second one kills at once); SIGUSR1 and SIGUSR2 are forwarded
//   unchanged (Slurm's --signal=USR1@90 pre-timeout warning) and the workers keep running.
// - run() blocks SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 in the calling thread and
//   reads them from a signalfd: call it from a single-threaded launcher, or block them in every
//   thread first. It returns when every worker has exited; leftover processes in a worker's
//   group (its own children) are killed then, so nothing outlives the run.
// Not here: the environment of the workers (worker_env.hpp), what is recorded (the caller's
// on_event), the run directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/worker_process.hpp"

namespace muster::launcher {

// Which ranks' output the console shows, each line prefixed "[rank N] ".
enum class tee_mode { none, rank0, all };

// How one worker ended.
struct rank_exit {
  int rank = 0;
  pid_t pid = -1;
  std::optional<int> exit_code;         // set when it exited
  std::optional<int> signal;            // set when a signal ended it
  bool first_failure = false;           // the failure that stopped the others
  bool knock_on = false;                // ended after the others were being stopped
  std::int64_t started_ms = 0;          // epoch ms when this attempt started it (error files
                                        // older than this are an earlier attempt's)
  std::int64_t time_ms = 0;             // epoch ms when it was reaped
  std::vector<std::string> last_lines;  // its last output lines (up to kLastLines)
  std::optional<std::int64_t> hung_ms;  // set when it was stopped for no heartbeat this long
  // the ranks found hung with it, at once, with nothing (steps, a stopped process) to tell which
  // the others waited on: which stopped first is not known here (diagnose reads their stacks)
  std::vector<int> hung_together;
  // Ended by a signal the launcher passed on (SIGUSR1: checkpoint and stop), or with
  // 128 + it as the built-in engine does after saving: asked to, not a failure.
  bool stopped_as_asked = false;

  bool failed() const { return signal.has_value() || exit_code.value_or(0) != 0; }
  // "exit code 3" or "signal 9 (SIGKILL)".
  std::string describe() const;
};

inline constexpr std::size_t kLastLines = 20;

// What happened, as it happens, for the caller to record.
struct supervisor_event {
  enum class kind {
    started,
    exited,
    forwarded_signal,
    stopping,
    killing,
    leftovers_killed,
    hung,
    stop_requested
  };
  kind what = kind::started;
  int rank = -1;  // the rank, for started and exited; -1 otherwise
  pid_t pid = -1;
  int signal = 0;                   // forwarded_signal, stopping: the signal
  const rank_exit* exit = nullptr;  // exited: how
  std::string detail;               // hung: every rank's last heartbeat (age, step) and
                                    // the ranks behind;
                                    // stop_requested: what stop_reason() said;
                                    // forwarded_signal: who delivered it, when not muster
};

struct supervise_options {
  std::chrono::milliseconds kill_grace{30000};  // SIGTERM -> SIGKILL (Slurm's KillWait)
  tee_mode tee = tee_mode::rank0;
  int console_fd = 1;  // where the console view goes
  // The log file of each rank (created or appended to); required.
  std::function<std::filesystem::path(int rank)> log_path;
  std::function<void(const supervisor_event&)> on_event;  // optional
  // Each rank's error file (TORCHELASTIC_ERROR_FILE; optional): a rank still running whose
  // error was written before the first rank that ended failed is the first failure, not it.
  std::function<std::filesystem::path(int rank)> error_path;
  // Hang detection: a worker whose heartbeat file (touched by the worker, see
  // MUSTER_HEARTBEAT_FILE) exists but has not changed for timeout_hang is hung: it gets
  // hang_signal (SIGABRT for a core and stack dump) and becomes the first failure. A worker that
  // never touched its file is never called hung. 0 = off.
  std::chrono::milliseconds timeout_hang{0};
  std::function<std::filesystem::path(int rank)> heartbeat_path;
  int hang_signal = 6;  // SIGABRT
  // The first worker's heartbeat progress as a line kept at the bottom of the console
  // (progress_line.hpp), redrawn in place: for a console that is a terminal. Needs
  // heartbeat_path.
  bool progress_line = false;
  // Called about every 250 ms while workers run (the launcher's periodic work, such as copying
  // their step records to the store); optional.
  std::function<void()> on_tick;
  // Stopping from outside (another node's rank failed): when stop_fd (-1 = none) becomes
  // readable, every worker is stopped as after a local first failure (SIGTERM, grace, SIGKILL)
  // and all of them are knock-ons. stop_reason() says why, for the stop_requested event.
  int stop_fd = -1;
  std::function<std::string()> stop_reason;
  // SIGUSR1/SIGUSR2 from this sender already reached every worker (Slurm's slurmstepd signals
  // every process of a step): recorded, not forwarded again, so no worker gets it twice.
  std::function<bool(pid_t sender)> workers_got_it;
};

struct supervise_result {
  std::vector<rank_exit> exits;        // one per worker, in spec order
  std::optional<int> first_failure;    // index into exits
  std::optional<int> launcher_signal;  // SIGTERM/SIGINT/SIGHUP the launcher received
  bool stop_requested = false;         // stopped through stop_fd
  std::vector<int> forwarded_signals;  // SIGUSR1/SIGUSR2 passed on, in order

  // The launcher's exit code: the first failure's exit code (128 + signal when a signal ended
  // it), else 128 + the launcher's signal, else that of the first rank that did not succeed
  // (one stopped as asked: 128 + the signal), else 0.
  int exit_code() const;
  // Whether the ranks that did not succeed all stopped on a signal the launcher passed on (the
  // pre-timeout checkpoint-and-stop), with no failure and no signal to the launcher itself.
  bool stopped_as_asked() const;
};

// Starts every spec, supervises them as above, and returns when all have exited. Throws (after
// stopping the workers already started) when a worker cannot be started.
supervise_result supervise(const std::vector<worker_spec>& specs, const supervise_options& options);

// "SIGTERM" for 15; "signal 77" for a number without a name.
std::string signal_name(int signal);

}  // namespace muster::launcher

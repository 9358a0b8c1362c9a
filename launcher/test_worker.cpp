// muster-test-worker: the documented stand-in worker `muster run` starts when no command is
// given, until the built-in engine (muster-train) exists; the launcher's tests and benchmarks
// drive it. It prints the torchrun contract it received and then does what its options say:
//
//   --sleep-ms N        run for N ms before exiting (default 0)
//   --exit-code N       exit with N (default 0)
//   --only-rank R       apply --exit-code / --signal / --after-ms only on rank R; other ranks
//                       run for --sleep-ms and exit 0
//   --after-ms N        wait N ms before the --exit-code or --signal of --only-rank
//   --signal S          kill itself with signal S (e.g. 9) instead of exiting
//   --ignore-term       ignore SIGTERM (to test the launcher's SIGKILL after its grace)
//   --heartbeat-ms N    touch $MUSTER_HEARTBEAT_FILE every N ms while running
//   --steps N           with --heartbeat-ms: each beat is one step of N, written into the
//                       heartbeat as the engine would ("step=K steps=N loss=... tokens_per_s=...")
//                       and appended to $MUSTER_STEPS_FILE as a step line (common/step_line.hpp)
//   --heartbeat-only    with --steps: no step lines, the heartbeat alone (a program of one's own
//                       that reports its progress there only)
//   --hang-after-ms N   on --only-rank (or every rank without it): stop touching the heartbeat
//                       after N ms but keep running, as a rank stuck in a collective would
//   --others-ahead      with --only-rank and --hang-after-ms: the other ranks stop too, at the
//                       same moment, one step further (their last beat one step on), as ranks
//                       waiting in the collective the stuck one never reached
//   --others-hang       with --only-rank and --hang-after-ms: the other ranks stop too, at the
//                       same moment, on the same step
//   --stop-self         with --hang-after-ms: stop (SIGSTOP) itself there, as a rank held by a
//                       debugger or stopped by hand
//   --error-message T   write T to $TORCHELASTIC_ERROR_FILE (muster's JSON, with the time) before
//                       failing
//   --linger-ms N       after the error file, take N ms more to exit, whatever signal comes (a
//                       rank that closed its connections and is still ending)
//   --others-exit-code C  with --only-rank: the other ranks exit C after --sleep-ms (peers whose
//                       collective failed), where they exit 0, writing their error file as such
//   --stderr-line T     print T on stderr before failing (a traceback's last line, for diagnose)
//   --lines N           print N numbered lines before anything else
//   --stop-on-usr1 MS   on SIGUSR1, wait MS ms (a checkpoint being saved) and exit 138 (128 +
//                       SIGUSR1), as the built-in engine does after its pre-timeout save
//
// On SIGUSR1 or SIGUSR2 it prints "rank R got SIGUSR1" and creates
// $MUSTER_RUN_DIR/signal-<NAME>-rank-<R>, then keeps running. On SIGTERM it prints
// "rank R got SIGTERM" and exits 143.
#include <signal.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace {

volatile sig_atomic_t pending_signal = 0;

void on_signal(int sig) {
  pending_signal = sig;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// `message` in $TORCHELASTIC_ERROR_FILE, as muster's JSON with the time (when the variable is set).
void write_error_file(const std::string& message) {
  if (env("TORCHELASTIC_ERROR_FILE").empty()) return;
  std::ofstream out(env("TORCHELASTIC_ERROR_FILE"));
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  out << R"({"message": {"message": ")" << message
      << R"(", "extraInfo": {"py_callstack": "", "timestamp": ")" << now_ms / 1000
      << R"(", "muster_time_ms": )" << now_ms << "}}}\n";
}

struct options {
  long sleep_ms = 0;
  int exit_code = 0;
  int only_rank = -1;
  long after_ms = 0;
  int signal = 0;
  bool ignore_term = false;
  long heartbeat_ms = 0;
  long steps = 0;
  long hang_after_ms = -1;
  bool others_ahead = false;
  bool others_hang = false;
  bool stop_self = false;
  std::string error_message;
  long linger_ms = 0;
  int others_exit_code = 0;
  std::string stderr_line;  // printed by the acting rank before it ends, as a traceback's last line
  int lines = 0;
  long stop_on_usr1_ms = -1;
  bool heartbeat_only = false;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "muster-test-worker: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--sleep-ms")
      o.sleep_ms = std::atol(next());
    else if (a == "--exit-code")
      o.exit_code = std::atoi(next());
    else if (a == "--only-rank")
      o.only_rank = std::atoi(next());
    else if (a == "--after-ms")
      o.after_ms = std::atol(next());
    else if (a == "--signal")
      o.signal = std::atoi(next());
    else if (a == "--ignore-term")
      o.ignore_term = true;
    else if (a == "--heartbeat-ms")
      o.heartbeat_ms = std::atol(next());
    else if (a == "--hang-after-ms")
      o.hang_after_ms = std::atol(next());
    else if (a == "--others-ahead")
      o.others_ahead = true;
    else if (a == "--others-hang")
      o.others_hang = true;
    else if (a == "--stop-self")
      o.stop_self = true;
    else if (a == "--steps")
      o.steps = std::atol(next());
    else if (a == "--error-message")
      o.error_message = next();
    else if (a == "--linger-ms")
      o.linger_ms = std::atol(next());
    else if (a == "--others-exit-code")
      o.others_exit_code = std::atoi(next());
    else if (a == "--lines")
      o.lines = std::atoi(next());
    else if (a == "--stderr-line")
      o.stderr_line = next();
    else if (a == "--stop-on-usr1")
      o.stop_on_usr1_ms = std::atol(next());
    else if (a == "--heartbeat-only")
      o.heartbeat_only = true;
    else {
      std::fprintf(stderr, "muster-test-worker: unknown option %s\n", argv[i]);
      std::exit(2);
    }
  }
  return o;
}

// One heartbeat: a touch, or with --steps the line of step `step` (written beside, renamed).
void beat(const options& o, long step) {
  const std::string file = env("MUSTER_HEARTBEAT_FILE");
  if (o.steps <= 0) {
    std::ofstream(file, std::ios::app);
    ::utime(file.c_str(), nullptr);
    return;
  }
  const std::string temp = file + ".tmp";
  std::ofstream(temp, std::ios::trunc)
      << "step=" << step << " steps=" << o.steps << " loss=" << 10.0 / static_cast<double>(step + 1)
      << " tokens_per_s=" << 4096.0 * 1000 / o.heartbeat_ms << "\n";
  std::rename(temp.c_str(), file.c_str());
  if (const std::string steps = env("MUSTER_STEPS_FILE"); !steps.empty() && !o.heartbeat_only) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::ofstream(steps, std::ios::app)
        << "step=" << step << " loss=" << 10.0 / static_cast<double>(step + 1)
        << " tokens=4096 step_time_s=" << static_cast<double>(o.heartbeat_ms) / 1000
        << " time_ms=" << now.count() << "\n";
  }
}

// Sleeps `ms`, answering USR1/USR2/TERM as the file comment says, touching the heartbeat.
// With `last_beat`, one more beat as it hangs: the step it was on (0) or one step on (1).
void run_for(long ms, const options& o, const std::string& rank, long hang_after_ms = -1,
             std::optional<long> last_beat = std::nullopt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto end = start + std::chrono::milliseconds(ms);
  const auto hang_at = hang_after_ms < 0 ? clock::time_point::max()
                                         : start + std::chrono::milliseconds(hang_after_ms);
  auto next_beat = clock::now();
  long step = 0;
  while (clock::now() < end) {
    if (int sig = pending_signal) {
      pending_signal = 0;
      std::printf("rank %s got SIG%s\n", rank.c_str(), sigabbrev_np(sig));
      std::fflush(stdout);
      if (sig == SIGTERM) std::exit(143);
      std::ofstream(env("MUSTER_RUN_DIR") + "/signal-SIG" + sigabbrev_np(sig) + "-rank-" + rank);
      if (sig == SIGUSR1 && o.stop_on_usr1_ms >= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(o.stop_on_usr1_ms));
        std::exit(128 + SIGUSR1);
      }
    }
    if (o.heartbeat_ms > 0 && clock::now() >= next_beat && clock::now() < hang_at) {
      beat(o, step);
      step = std::min(step + 1, o.steps);
      next_beat = clock::now() + std::chrono::milliseconds(o.heartbeat_ms);
    }
    if (last_beat && o.heartbeat_ms > 0 && clock::now() >= hang_at) {
      beat(o, std::max(0L, step - 1 + *last_beat));  // every rank's beats stop at this moment
      last_beat.reset();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const std::string rank = env("RANK");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);
  if (o.ignore_term)
    signal(SIGTERM, SIG_IGN);
  else
    sigaction(SIGTERM, &sa, nullptr);

  std::printf("rank %s of %s (local %s of %s, node %s) master %s:%s run %s restart %s\n",
              rank.c_str(), env("WORLD_SIZE").c_str(), env("LOCAL_RANK").c_str(),
              env("LOCAL_WORLD_SIZE").c_str(), env("GROUP_RANK").c_str(),
              env("MASTER_ADDR").c_str(), env("MASTER_PORT").c_str(),
              env("TORCHELASTIC_RUN_ID").c_str(), env("TORCHELASTIC_RESTART_COUNT").c_str());
  for (int i = 0; i < o.lines; ++i) std::printf("rank %s line %d\n", rank.c_str(), i);
  std::fflush(stdout);

  const bool acts = o.only_rank < 0 || std::to_string(o.only_rank) == rank;
  if (!acts) {
    if (o.others_ahead || o.others_hang)
      run_for(o.sleep_ms, o, rank, o.hang_after_ms, o.others_ahead ? 1 : 0);
    else
      run_for(o.sleep_ms, o, rank);
    if (o.others_exit_code != 0) {
      write_error_file("collective failed: a peer closed its connection");
      std::fprintf(stderr, "rank %s: exiting with %d\n", rank.c_str(), o.others_exit_code);
    }
    return o.others_exit_code;
  }
  if (o.stop_self && o.hang_after_ms >= 0) {
    run_for(o.hang_after_ms + 20, o, rank, o.hang_after_ms, 0);
    ::raise(SIGSTOP);
  }
  run_for(o.after_ms > 0 ? o.after_ms : o.sleep_ms, o, rank, o.hang_after_ms,
          o.others_ahead || o.others_hang ? std::optional<long>(0) : std::nullopt);
  if (!o.error_message.empty()) write_error_file(o.error_message);
  if (o.linger_ms > 0) {  // signals wait: this rank is ending already
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(o.linger_ms));
  }
  if (!o.stderr_line.empty()) std::fprintf(stderr, "%s\n", o.stderr_line.c_str());
  if (o.signal != 0) {
    std::fprintf(stderr, "rank %s: raising signal %d\n", rank.c_str(), o.signal);
    std::fflush(stderr);
    signal(o.signal, SIG_DFL);
    raise(o.signal);
  }
  if (o.exit_code != 0) {
    std::fprintf(stderr, "rank %s: exiting with %d\n", rank.c_str(), o.exit_code);
  }
  return o.exit_code;
}

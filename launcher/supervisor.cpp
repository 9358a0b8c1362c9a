// Supervising a node's workers: see supervisor.hpp.
#include "launcher/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/proc_stat.hpp"
#include "common/run_store_records.hpp"
#include "common/worker_error.hpp"
#include "launcher/heartbeat.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/progress_line.hpp"

namespace muster::launcher {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kProgressEvery{250};

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a console or log that cannot take more loses output, not the run
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// One worker as the loop tracks it.
struct worker {
  rank_exit exit;
  int output_fd = -1;  // -1 once at end of file
  int log_fd = -1;
  bool running = true;
  bool tee = false;
  bool hang_signalled = false;    // sent the hang signal: not found hung again
  // since when its process (group) is seen stopped, for a rank with no heartbeat yet
  std::optional<std::chrono::steady_clock::time_point> stopped_since;
  std::string partial;            // the unfinished last line
  std::deque<std::string> lines;  // the last kLastLines lines
};

class node_supervisor {
 public:
  explicit node_supervisor(const supervise_options& options) : options_(options) {}
  ~node_supervisor() {
    for (auto& w : workers_) {
      if (w.output_fd >= 0) ::close(w.output_fd);
      if (w.log_fd >= 0) ::close(w.log_fd);
    }
    if (signal_fd_ >= 0) ::close(signal_fd_);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::sigaction(SIGPIPE, &old_sigpipe_, nullptr);
  }

  supervise_result run(const std::vector<worker_spec>& specs) {
    block_signals();
    try {
      for (const auto& spec : specs) start(spec);
    } catch (...) {
      stop_all(SIGKILL);
      while (any_running()) reap(/*block=*/true);
      throw;
    }
    loop();
    return finish();
  }

 private:
  void block_signals() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&mask, sig);
    MUSTER_CHECK(::sigprocmask(SIG_BLOCK, &mask, &old_mask_) == 0, errc::internal,
                 "sigprocmask: {}", strerror(errno));
    // A console that went away (`muster run ... | head`) must not kill the launcher: its
    // writes fail and are dropped, the logs keep everything.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old_sigpipe_);
    signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    MUSTER_CHECK(signal_fd_ >= 0, errc::io, "signalfd: {}", strerror(errno));
  }

  void start(const worker_spec& spec) {
    worker w;
    w.exit.rank = spec.rank;
    w.tee = options_.tee == tee_mode::all || (options_.tee == tee_mode::rank0 && spec.rank == 0);
    auto log = options_.log_path(spec.rank);
    w.log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    MUSTER_CHECK(w.log_fd >= 0, errc::io, "rank {}: cannot open its log {}: {}", spec.rank,
                 log.string(), strerror(errno));
    w.exit.started_ms = store::now_ms();
    auto spawned = spawn_worker(spec);
    w.exit.pid = spawned.pid;
    w.output_fd = spawned.output_fd;
    workers_.push_back(std::move(w));
    emit(supervisor_event::kind::started, spec.rank, spawned.pid, 0, nullptr);
  }

  // An event's handler may print (stderr is often the same terminal): the progress line is
  // cleared first and drawn again after.
  void emit(supervisor_event::kind what, int rank, pid_t pid, int sig,
            const rank_exit* exit = nullptr, std::string detail = {}) {
    if (!options_.on_event) return;
    if (!progress_text_.empty()) write_all(options_.console_fd, "\r\x1b[K");
    options_.on_event({what, rank, pid, sig, exit, std::move(detail)});
    if (!progress_text_.empty()) write_all(options_.console_fd, progress_text_);
  }

  bool any_running() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const worker& w) { return w.running; });
  }
  bool any_output() const {
    return std::any_of(workers_.begin(), workers_.end(),
                       [](const worker& w) { return w.output_fd >= 0; });
  }

  void loop() {
    std::optional<clock::time_point> drain_until;
    while (any_running() || (any_output() && drain_until && clock::now() < *drain_until)) {
      std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
      std::vector<worker*> owners{nullptr};
      const bool watch_stop = options_.stop_fd >= 0 && !stopping_;
      if (watch_stop) {
        fds.push_back({options_.stop_fd, POLLIN, 0});
        owners.push_back(nullptr);
      }
      for (auto& w : workers_)
        if (w.output_fd >= 0) {
          fds.push_back({w.output_fd, POLLIN, 0});
          owners.push_back(&w);
        }
      int rc = ::poll(fds.data(), fds.size(), timeout_ms(drain_until));
      if (rc < 0 && errno != EINTR) MUSTER_THROW(errc::internal, "poll: {}", strerror(errno));
      if (fds[0].revents & POLLIN) read_signals();
      if (watch_stop && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !stopping_) {
        stop_requested_ = true;
        emit(supervisor_event::kind::stop_requested, -1, -1, SIGTERM, nullptr,
             options_.stop_reason ? options_.stop_reason() : std::string());
        begin_stop(SIGTERM);
      }
      for (std::size_t i = watch_stop ? 2 : 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_output(*owners[i]);
      if (options_.timeout_hang.count() > 0 && !stopping_) check_heartbeats();
      if (options_.progress_line && !stopping_) update_progress();
      if (options_.on_tick && clock::now() >= next_tick_) {
        next_tick_ = clock::now() + kProgressEvery;
        options_.on_tick();
      }
      if (kill_at_ && clock::now() >= *kill_at_) {
        kill_at_.reset();
        emit(supervisor_event::kind::killing, -1, -1, SIGKILL, nullptr);
        stop_all(SIGKILL);
      }
      // Output still in the pipes when the last worker ends is read for a short while; a
      // grandchild holding a pipe open does not keep the launcher waiting.
      if (!any_running() && !drain_until)
        drain_until = clock::now() + std::chrono::milliseconds(300);
    }
  }

  // Ranks stopped (SIGSTOP, a debugger) before their first heartbeat have no age to go by: how
  // long they have been seen stopped stands for it. Looked at once a second (a pass over /proc).
  void watch_stopped_starts() {
    if (clock::now() < next_stopped_check_) return;
    next_stopped_check_ = clock::now() + std::chrono::seconds(1);
    std::vector<std::int64_t> silent;
    for (const auto& w : workers_)
      if (w.running && !heartbeat_age_ms(options_.heartbeat_path(w.exit.rank)))
        silent.push_back(w.exit.pid);
    const auto stopped = stopped_groups(silent);
    for (auto& w : workers_) {
      if (!stopped.contains(w.exit.pid))
        w.stopped_since.reset();
      else if (!w.stopped_since)
        w.stopped_since = clock::now();
    }
  }

  void check_heartbeats() {
    if (clock::now() < next_heartbeat_check_) return;
    next_heartbeat_check_ = clock::now() + std::chrono::milliseconds(100);
    watch_stopped_starts();
    std::vector<worker*> hung;
    for (auto& w : workers_) {
      if (!w.running || w.hang_signalled) continue;
      auto age = heartbeat_age_ms(options_.heartbeat_path(w.exit.rank));
      if (!age && w.stopped_since)
        age = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - *w.stopped_since)
                  .count();
      if (age && *age > options_.timeout_hang.count()) {
        w.exit.hung_ms = *age;
        hung.push_back(&w);
      }
    }
    if (hung.empty()) return;
    std::vector<std::pair<int, std::optional<heartbeat>>> beats;
    for (auto& w : workers_)
      if (w.running)
        beats.emplace_back(w.exit.rank, read_heartbeat(options_.heartbeat_path(w.exit.rank)));
    std::vector<std::pair<int, std::optional<heartbeat>>> hung_beats;
    for (worker* w : hung)
      hung_beats.emplace_back(w->exit.rank, read_heartbeat(options_.heartbeat_path(w->exit.rank)));
    // a rank whose process is stopped (SIGSTOP, a debugger: state T or t) is the one the others
    // wait on, whatever the steps say; else the ranks a step behind the others
    // (of every running rank: a stopped one may cross the limit alone, a step before the rest)
    std::vector<std::int64_t> groups;  // each worker leads its own
    for (const auto& w : workers_)
      if (w.running) groups.push_back(w.exit.pid);
    const auto stopped_pgids = stopped_groups(groups);  // its program, or a wrapper script's child
    std::vector<int> stopped;
    for (const auto& w : workers_)
      if (w.running && stopped_pgids.contains(w.exit.pid)) stopped.push_back(w.exit.rank);
    const std::size_t running = groups.size();
    const bool by_state = !stopped.empty() && stopped.size() < running;
    const auto culprits = by_state ? stopped : hang_culprits(hung_beats);
    hang_culprits_.insert(culprits.begin(), culprits.end());
    if (culprits.empty() && hung.size() > 1)
      for (worker* w : hung)
        for (const worker* other : hung) w->exit.hung_together.push_back(other->exit.rank);
    const std::string detail =
        "last heartbeats: " + describe_heartbeats(beats) +
        (by_state ? fmt::format("; waited on: rank {} ({})", fmt::join(stopped, ", "), kStoppedSaid)
                  : describe_hang_culprits(hung_beats));
    for (worker* w : hung) {
      emit(supervisor_event::kind::hung, w->exit.rank, w->exit.pid, options_.hang_signal, nullptr,
           detail);
      ::kill(-w->exit.pid, options_.hang_signal);
      // a stopped rank gets it once continued: its stack is dumped where it stood
      if (by_state && std::find(stopped.begin(), stopped.end(), w->exit.rank) != stopped.end())
        ::kill(-w->exit.pid, SIGCONT);
      w->hang_signalled = true;
    }
    // a dump that never ends, or a rank the signal cannot reach (stuck in the kernel), is cut
    // short: once, from the first hang, not pushed on by later ones
    if (!kill_at_) kill_at_ = clock::now() + options_.kill_grace;
  }

  // The progress line: the first worker's heartbeat, redrawn when it changed.
  void update_progress() {
    if (clock::now() < next_progress_) return;
    next_progress_ = clock::now() + kProgressEvery;
    if (workers_.empty() || !workers_.front().running) return;
    auto beat = read_heartbeat(options_.heartbeat_path(workers_.front().exit.rank));
    if (!beat) return;
    auto text = progress_.line(beat->progress, clock::now());
    if (!text || *text == progress_text_) return;
    progress_text_ = *text;
    write_all(options_.console_fd, "\r\x1b[K" + progress_text_);
  }

  int timeout_ms(const std::optional<clock::time_point>& drain_until) const {
    std::optional<clock::time_point> next = kill_at_;
    if (options_.timeout_hang.count() > 0 && !stopping_) {
      auto check = clock::now() + std::chrono::milliseconds(100);
      if (!next || check < *next) next = check;
    }
    if (options_.progress_line && !stopping_ && (!next || next_progress_ < *next))
      next = std::max(next_progress_, clock::now());
    if (options_.on_tick && (!next || next_tick_ < *next))
      next = std::max(next_tick_, clock::now());
    if (drain_until && (!next || *drain_until < *next)) next = drain_until;
    if (!next) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()) + 1);
  }

  void read_signals() {
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap(/*block=*/false);
      } else if (sig == SIGUSR1 || sig == SIGUSR2) {
        forwarded_.push_back(sig);
        const auto sender = static_cast<pid_t>(info.ssi_pid);
        if (options_.workers_got_it && options_.workers_got_it(sender)) {
          emit(supervisor_event::kind::forwarded_signal, -1, -1, sig, nullptr,
               fmt::format("delivered to every worker by its sender (pid {})", sender));
        } else {
          emit(supervisor_event::kind::forwarded_signal, -1, -1, sig, nullptr);
          signal_running(sig);
        }
      } else {
        on_stop_signal(sig);
      }
    }
  }

  void on_stop_signal(int sig) {
    if (launcher_signal_ || kill_at_) {  // asked twice: no more grace
      kill_at_.reset();
      emit(supervisor_event::kind::killing, -1, -1, SIGKILL, nullptr);
      stop_all(SIGKILL);
      return;
    }
    launcher_signal_ = sig;
    emit(supervisor_event::kind::stopping, -1, -1, sig, nullptr);
    begin_stop(sig);
  }

  // `spare`: a worker ending by itself (failing_first_), left its own exit until the grace ends
  void begin_stop(int sig, std::optional<int> spare = std::nullopt) {
    stopping_ = true;
    stop_all(sig, spare);
    kill_at_ = clock::now() + options_.kill_grace;
  }

  // Signals the process group of every worker still running.
  void signal_running(int sig) {
    for (auto& w : workers_)
      if (w.running) ::kill(-w.exit.pid, sig);
  }
  // Signals every worker's group, running or not (its children may still be there).
  void stop_all(int sig, std::optional<int> spare = std::nullopt) {
    for (auto& w : workers_)
      if (!spare || &w - workers_.data() != *spare) ::kill(-w.exit.pid, sig);
  }

  void reap(bool block) {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, block ? 0 : WNOHANG);
      if (pid <= 0) return;
      auto it = std::find_if(workers_.begin(), workers_.end(),
                             [pid](const worker& w) { return w.exit.pid == pid && w.running; });
      if (it == workers_.end()) continue;
      record_exit(*it, status);
      if (block) return;
    }
  }

  // Whether a forwarded signal ended it, or it exited with 128 + one (as it asked to).
  bool ended_by_forwarded(const rank_exit& e) const {
    for (int sig : forwarded_)
      if (e.signal == sig || e.exit_code == 128 + sig) return true;
    return false;
  }

  // When this attempt's worker wrote its error file (options_.error_path), if it did.
  std::optional<std::int64_t> error_time(const worker& w) const {
    if (!options_.error_path) return std::nullopt;
    const auto error = read_worker_error(options_.error_path(w.exit.rank));
    if (!error || error->time_ms == 0 || error->before(w.exit.started_ms)) return std::nullopt;
    return error->time_ms;
  }

  // A worker still running that wrote its error file before `w` wrote its own: the one that
  // failed first, w its knock-on. A rank that closes its connections after writing its error
  // and before it exits makes its peers' collectives fail, and they may be reaped first. A w
  // with no error file (killed, or not ours) stays first: when it died is known only as late as
  // it was reaped.
  std::optional<int> failed_earlier(const worker& w) const {
    const auto mine = error_time(w);
    if (!mine) return std::nullopt;
    std::int64_t earliest = *mine;
    std::optional<int> found;
    for (const auto& other : workers_)
      if (&other != &w && other.running)
        if (const auto t = error_time(other); t && *t < earliest) {
          earliest = *t;
          found = static_cast<int>(&other - workers_.data());
        }
    return found;
  }

  void record_exit(worker& w, int status) {
    w.running = false;
    if (WIFEXITED(status)) w.exit.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) w.exit.signal = WTERMSIG(status);
    w.exit.time_ms = store::now_ms();
    const int index = static_cast<int>(&w - workers_.data());
    bool stop_others = false;
    if (stopping_ && failing_first_ == index && w.exit.failed()) {
      w.exit.first_failure = true;  // its error came first; it ended after its peers
      first_failure_ = index;
    } else if (stopping_ && failing_first_ == index && reaped_first_) {
      // it wrote an error and still ended well: the rank reaped first failed first after all
      auto& first = workers_[static_cast<std::size_t>(*reaped_first_)];
      first.exit.knock_on = false;
      first.exit.first_failure = true;
      first_failure_ = *reaped_first_;
      w.exit.knock_on = true;
    } else if (stopping_) {
      w.exit.knock_on = true;
    } else if (w.exit.failed() && !ended_by_forwarded(w.exit) && !w.exit.hung_ms &&
               (failing_first_ = failed_earlier(w))) {
      w.exit.knock_on = true;
      reaped_first_ = index;
      stop_others = true;
    } else if (w.exit.failed() && ended_by_forwarded(w.exit)) {
      w.exit.stopped_as_asked = true;
    } else if (w.exit.failed() && w.exit.hung_ms && !hang_culprits_.empty() &&
               !hang_culprits_.contains(w.exit.rank)) {
      w.exit.knock_on = true;  // hung waiting on a rank behind it, which fails first
    } else if (w.exit.failed()) {
      w.exit.first_failure = true;
      first_failure_ = static_cast<int>(&w - workers_.data());
    }
    read_output(w);  // what it wrote just before it ended belongs to its record
    w.exit.last_lines.assign(w.lines.begin(), w.lines.end());
    if (!w.partial.empty()) w.exit.last_lines.push_back(w.partial);
    emit(supervisor_event::kind::exited, w.exit.rank, w.exit.pid, 0, &w.exit);
    if (stop_others)  // the rank whose error came first ends by itself: its exit code is the run's
      begin_stop(SIGTERM, failing_first_);
    else if (w.exit.first_failure && !stopping_)
      begin_stop(SIGTERM);
  }

  void read_output(worker& w) {
    char buffer[65536];
    while (w.output_fd >= 0) {
      pollfd p{w.output_fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      ssize_t n = ::read(w.output_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(w.output_fd);
        w.output_fd = -1;
        return;
      }
      std::string_view chunk(buffer, static_cast<std::size_t>(n));
      write_all(w.log_fd, chunk);
      split_lines(w, chunk);
    }
  }

  // One line of a worker's output on the console view, above the progress line if one shows.
  void tee_line(const worker& w, std::string_view line) {
    if (progress_text_.empty()) {
      write_all(options_.console_fd, fmt::format("[rank {}] {}\n", w.exit.rank, line));
      return;
    }
    write_all(options_.console_fd,
              fmt::format("\r\x1b[K[rank {}] {}\n{}", w.exit.rank, line, progress_text_));
  }

  void split_lines(worker& w, std::string_view chunk) {
    for (std::size_t nl; (nl = chunk.find('\n')) != std::string_view::npos;) {
      w.partial.append(chunk.substr(0, nl));
      if (w.tee) tee_line(w, w.partial);
      w.lines.push_back(std::move(w.partial));
      if (w.lines.size() > kLastLines) w.lines.pop_front();
      w.partial.clear();
      chunk.remove_prefix(nl + 1);
    }
    w.partial.append(chunk);
  }

  supervise_result finish() {
    bool leftovers = false;
    for (auto& w : workers_) leftovers |= ::kill(-w.exit.pid, SIGKILL) == 0;
    if (leftovers) emit(supervisor_event::kind::leftovers_killed, -1, -1, SIGKILL, nullptr);
    supervise_result result;
    for (auto& w : workers_) {
      if (w.tee && !w.partial.empty()) tee_line(w, w.partial);
      result.exits.push_back(w.exit);
    }
    if (!progress_text_.empty()) write_all(options_.console_fd, "\n");  // the last one stays
    result.first_failure = first_failure_;
    result.launcher_signal = launcher_signal_;
    result.stop_requested = stop_requested_;
    result.forwarded_signals = forwarded_;
    return result;
  }

  const supervise_options& options_;
  std::vector<worker> workers_;
  int signal_fd_ = -1;
  sigset_t old_mask_{};
  struct sigaction old_sigpipe_ {};
  bool stopping_ = false;
  std::optional<clock::time_point> kill_at_;
  std::optional<int> first_failure_;
  std::optional<int> failing_first_;  // still running, its error file before the first reaped
  std::optional<int> reaped_first_;   // that first reaped, a knock-on of failing_first_
  std::set<int> hang_culprits_;  // hung ranks the other hung ones wait on (hang_culprits)
  std::optional<int> launcher_signal_;
  bool stop_requested_ = false;
  std::vector<int> forwarded_;
  clock::time_point next_heartbeat_check_{};
  clock::time_point next_stopped_check_{};
  progress_meter progress_;
  std::string progress_text_;  // the progress line on the console; empty: none drawn
  clock::time_point next_progress_{};
  clock::time_point next_tick_{};
};

}  // namespace

std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

std::string rank_exit::describe() const {
  std::string how = signal ? fmt::format("signal {} ({})", *signal, signal_name(*signal))
                           : fmt::format("exit code {}", exit_code.value_or(-1));
  if (hung_ms) return fmt::format("hung (no heartbeat for {} ms), then {}", *hung_ms, how);
  return how;
}

int supervise_result::exit_code() const {
  if (first_failure) {
    const auto& e = exits[static_cast<std::size_t>(*first_failure)];
    return e.signal ? 128 + *e.signal : *e.exit_code;
  }
  if (launcher_signal) return 128 + *launcher_signal;
  for (const auto& e : exits)
    if (e.failed()) return e.signal ? 128 + *e.signal : *e.exit_code;
  return 0;
}

bool supervise_result::stopped_as_asked() const {
  if (first_failure || launcher_signal) return false;
  bool any = false;
  for (const auto& e : exits) {
    if (e.failed() && !e.stopped_as_asked) return false;
    any = any || e.stopped_as_asked;
  }
  return any;
}

supervise_result supervise(const std::vector<worker_spec>& specs,
                           const supervise_options& options) {
  MUSTER_CHECK(static_cast<bool>(options.log_path), errc::internal, "supervise: no log_path");
  node_supervisor s(options);
  return s.run(specs);
}

}  // namespace muster::launcher

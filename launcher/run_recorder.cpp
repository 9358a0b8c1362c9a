// Recording a node's ranks and summing up: see run_recorder.hpp.
#include "launcher/run_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/sqlite_db.hpp"
#include "common/worker_error.hpp"
#include "launcher/launcher_lines.hpp"

namespace muster::launcher {

std::optional<std::string> last_output_tail(std::string_view message) {
  constexpr std::size_t kTail = 400;
  const auto at = message.find(kLastOutput);
  if (at == std::string_view::npos) return std::nullopt;
  auto output = message.substr(at + kLastOutput.size());
  // faulthandler's dump ends with the modules loaded, after the stack that says where it stood
  if (const auto modules = output.rfind("Extension modules: ");
      modules != std::string_view::npos &&
      (modules == 0 || output.substr(0, modules).ends_with(" | ")))
    output = output.substr(0, modules == 0 ? 0 : modules - 3);
  if (output.size() <= kTail) return std::string(output);
  return "..." + std::string(output.substr(output.size() - kTail));
}

namespace {

constexpr off_t kReserveBytes = 256 << 10;  // a run's end: a few pages of SQLite's WAL
constexpr std::size_t kMaxPending = 4096;   // records kept for it (ranks, events, errors)

// Whether a store error is a full disk (sqlite_db.hpp's store_error says so).
bool disk_full(const error& e) {
  const auto* store = dynamic_cast<const store::store_error*>(&e);
  return store && store->disk_full();
}

}  // namespace

void run_recorder::write(std::function<void()> f, bool essential) {
  if (full_) {  // what room there is, is the run's end's: kept for it, in order
    if (essential && pending_.size() < kMaxPending) pending_.push_back(std::move(f));
    return;
  }
  try {
    f();
  } catch (const error& e) {
    full_ = disk_full(e);
    if (!store_error_) {
      store_error_ = e.what();
      fmt::print(stderr, "muster: {}; the ranks go on, and this node records {} from now on{}\n",
                 e.what(), full_ ? "only their ends" : "what it still can",
                 full_ ? " (in room it kept for them)" : "");
    }
    if (full_ && essential) pending_.push_back(std::move(f));
  }
}

void run_recorder::write_pending() {
  if (!full_) return;
  std::error_code ec;  // the room kept for the run's end, freed for it
  if (!reserve_.empty()) std::filesystem::remove(std::exchange(reserve_, {}), ec);
  full_ = false;
  for (auto& f : std::exchange(pending_, {})) {
    try {
      f();
    } catch (const error&) {
    }
  }
}

run_recorder::run_recorder(store::node_writer& db, const store::run_paths& paths, std::string host,
                           int first_rank)
    : db_(db), paths_(paths), host_(std::move(host)), first_rank_(first_rank) {
  // room kept on the run store's disk, so a disk that fills up during the run still takes the
  // ranks' ends and the run's state (else the run reads as lost)
  const auto reserve = paths_.dir() / fmt::format(".store-reserve-{}-{}", host_, first_rank_);
  const int fd = ::open(reserve.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const bool kept = ::posix_fallocate(fd, 0, kReserveBytes) == 0;
  ::close(fd);
  std::error_code ec;
  if (kept)
    reserve_ = reserve;
  else
    std::filesystem::remove(reserve, ec);
}

run_recorder::~run_recorder() {
  std::error_code ec;
  if (!reserve_.empty()) std::filesystem::remove(reserve_, ec);
}

void run_recorder::operator()(const supervisor_event& e) {
  using kind = supervisor_event::kind;
  switch (e.what) {
    case kind::started:
      put_rank(e.rank, e.pid, store::rank_state::running, nullptr);
      break;
    case kind::exited:
      on_exit(*e.exit);
      break;
    case kind::forwarded_signal:
      event(std::nullopt, store::severity::info, "signal_forwarded",
            e.detail.empty() ? fmt::format("{} forwarded to every worker", signal_name(e.signal))
                             : fmt::format("{} {}", signal_name(e.signal), e.detail));
      break;
    case kind::stopping:
      stopped_by_ = fmt::format("the launcher's {}", signal_name(e.signal));
      event(std::nullopt, store::severity::warn, "launcher_signal",
            fmt::format("the launcher got {}: stopping the workers", signal_name(e.signal)));
      break;
    case kind::stop_requested:
      stopped_by_ = "a failure on another node";
      event(std::nullopt, store::severity::warn, "remote_failure",
            fmt::format("stopping the workers: {}", e.detail));
      break;
    case kind::killing:
      event(std::nullopt, store::severity::warn, "kill",
            "workers still running after the grace period: SIGKILL");
      break;
    case kind::hung: {
      auto text =
          fmt::format("rank {} is hung: {} sent; {}", e.rank, signal_name(e.signal), e.detail);
      fmt::print(stderr, "muster: {}\n", text);
      event(e.rank, store::severity::error, "hang", std::move(text));
      break;
    }
    case kind::leftovers_killed:
      event(std::nullopt, store::severity::warn, "leftovers_killed",
            "processes left behind by the workers were killed");
      break;
  }
}

void run_recorder::put_rank(int rank, pid_t pid, store::rank_state state, const rank_exit* exit) {
  store::rank_record r;
  r.rank = rank;
  r.host = host_;
  r.local_rank = rank - first_rank_;
  r.pid = pid;
  r.state = state;
  if (exit && exit->exit_code) r.exit_code = *exit->exit_code;
  if (exit && exit->signal) r.signal = *exit->signal;
  r.updated_ms = store::now_ms();
  write([this, r] { db_.put_rank(r); });
}

void run_recorder::event(std::optional<int> rank, store::severity level, std::string kind,
                         std::string text) {
  store::event_record record{store::now_ms(),
                             rank ? std::optional<std::int64_t>(*rank) : std::nullopt, level,
                             std::move(kind), std::move(text)};
  write([this, record] { db_.add_event(record); });
}

void run_recorder::steps(const std::vector<store::step_record>& batch) {
  write([this, &batch] { db_.add_steps(batch); }, /*essential=*/false);  // never kept
}

void run_recorder::set_state(const std::string& run_id, store::run_state state) {
  write_pending();  // the run's end: what could not be written for a full disk, first
  write([this, run_id, state] { db_.set_run_state(run_id, state, store::now_ms()); });
}

void run_recorder::on_exit(const rank_exit& x) {
  auto state = !x.failed()                        ? store::rank_state::succeeded
               : x.knock_on || x.stopped_as_asked ? store::rank_state::killed
                                                  : store::rank_state::failed;
  put_rank(x.rank, x.pid, state, &x);
  // a rank that ended well by itself (not on the launcher's stop), this attempt's first
  if (!x.failed() && !x.knock_on && !x.stopped_as_asked &&
      (!first_success_ || first_success_->time_ms < x.started_ms))
    first_success_ = x;
  // its error file, unless an earlier attempt's (a restart, a requeued job's start): that was
  // recorded then, or lost with it
  const auto error = [&]() -> std::optional<worker_error> {
    auto e = x.failed() ? read_worker_error(paths_.rank_error_file(x.rank)) : std::nullopt;
    if (!e || e->before(x.started_ms)) return std::nullopt;
    return e;
  }();
  if (error) {
    const store::error_record record{error->time_ms > 0 ? error->time_ms : store::now_ms(),
                                     x.rank,
                                     error->step,
                                     error->phase,
                                     error->kind,
                                     error->message};
    write([this, record] { db_.add_error(record); });
  }
  if (x.first_failure) {
    first_error_.reset();
    if (error) {
      first_error_ = error->message;
      if (!error->phase.empty())
        *first_error_ += error->step
                             ? fmt::format(" (in {} of step {})", error->phase, *error->step + 1)
                             : fmt::format(" (in {})", error->phase);
    }
    std::string text = fmt::format("rank {} on {} (pid {}){}: {}", x.rank, host_, x.pid,
                                   kFailedFirst, x.describe());
    if (first_error_) text += fmt::format("; error file: {}", *first_error_);
    ended_early_.reset();
    if (first_success_ && first_success_->time_ms >= x.started_ms &&
        x.time_ms - first_success_->time_ms >= kEndedEarlyMs)
      ended_early_ = ended_early(first_success_->rank, x.time_ms - first_success_->time_ms);
    if (ended_early_) text += "; " + *ended_early_;
    if (!x.hung_together.empty()) text += "; " + hung_together(x.hung_together);
    if (!x.last_lines.empty())
      text += fmt::format("{}{}", kLastOutput, fmt::join(x.last_lines, " | "));
    event(x.rank, store::severity::error, "first_failure", text);
  } else if (x.stopped_as_asked) {
    event(x.rank, store::severity::info, "stopped_as_asked",
          fmt::format("rank {} stopped as asked, on the stop signal that reached it: {}", x.rank,
                      x.describe()));
  } else if (x.knock_on) {
    event(x.rank, store::severity::info, "knock_on",
          fmt::format("rank {} stopped {}: {}", x.rank,
                      stopped_by_.empty() ? "after the first failure" : "on " + stopped_by_,
                      x.describe()));
  } else {
    event(x.rank, x.failed() ? store::severity::error : store::severity::info, "rank_exit",
          fmt::format("rank {}: {}", x.rank, x.describe()));
  }
}

void print_summary(const supervise_result& result, const store::run_paths& paths,
                   const run_recorder& recorder, const std::optional<std::string>& elsewhere) {
  const auto stopped = std::count_if(result.exits.begin(), result.exits.end(),
                                     [](const rank_exit& e) { return e.knock_on; });
  if (elsewhere) {
    fmt::print(stderr, "muster: {}; {} rank(s) of this node stopped. Logs: {}\n", *elsewhere,
               stopped, paths.logs_dir().string());
    return;
  }
  if (!result.first_failure) {
    if (result.launcher_signal)
      fmt::print(stderr, "muster: stopped by {}; logs in {}\n",
                 signal_name(*result.launcher_signal), paths.logs_dir().string());
    else if (result.stopped_as_asked()) {
      // ranks the signal itself ended had no handler yet (still starting): they saved nothing
      std::vector<int> unhandled;
      for (const auto& e : result.exits)
        if (e.signal && *e.signal == result.forwarded_signals.back()) unhandled.push_back(e.rank);
      fmt::print(stderr,
                 "muster: the ranks stopped on the {} passed on to them, as asked ({}); logs "
                 "in {}\n",
                 signal_name(result.forwarded_signals.back()),
                 unhandled.empty()
                     ? fmt::format("a program that handles it, as the built-in engine does, "
                                   "saves a checkpoint first; exit code {}",
                                   result.exit_code())
                     : fmt::format("rank(s) {} ended by the signal itself, before they handled "
                                   "it: no checkpoint from them",
                                   fmt::join(unhandled, ", ")),
                 paths.logs_dir().string());
    } else if (result.exit_code() == 0)  // the run's id, for status and diagnose
      fmt::print(stderr, "muster: run {}: the {} rank(s) of this node succeeded; logs in {}\n",
                 paths.run_id(), result.exits.size(), paths.logs_dir().string());
    return;
  }
  const auto& x = result.exits[static_cast<std::size_t>(*result.first_failure)];
  fmt::print(stderr,
             "muster: rank {} on {}{} ({}); {} other rank(s) of this node stopped. Log: {}\n",
             x.rank, recorder.host(), kFailedFirst, x.describe(), stopped,
             paths.rank_log(x.rank).string());
  if (const auto& error = recorder.first_error())
    fmt::print(stderr, "muster: rank {} error file: {}\n", x.rank, *error);
  if (const auto& early = recorder.ended_early_note()) fmt::print(stderr, "muster: {}\n", *early);
  if (!x.hung_together.empty()) fmt::print(stderr, "muster: {}\n", hung_together(x.hung_together));
  for (const auto& line : x.last_lines) fmt::print(stderr, "  [rank {}] {}\n", x.rank, line);
}

}  // namespace muster::launcher

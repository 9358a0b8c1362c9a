// From signals to a diagnosis: see diagnosis.hpp.
#include "launcher/diagnose/diagnosis.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "common/byte_size.hpp"
#include "common/worker_error.hpp"
#include "launcher/diagnose/categories.hpp"
#include "launcher/diagnose/explain.hpp"
#include "launcher/diagnose/line_fields.hpp"
#include "launcher/diagnose/line_time.hpp"
#include "launcher/launcher_lines.hpp"

namespace muster::launcher::diagnose {
namespace {

constexpr std::size_t kMaxSuspicious = 10;
constexpr std::size_t kMaxEvidenceText = 400;

constexpr std::string_view kSuspiciousWords[] = {
    "Error", "ERROR", "error:", "Traceback", "FATAL", "failed"};

// The words of a Python exception line that no error word above holds ("Exception: boom"): the
// exception that ends a failed rank's traceback is quoted (diagnosis.hpp).
constexpr std::string_view kExceptionWord = "Exception";

// Python's faulthandler, as a hung rank's SIGABRT (launch.hang_dump) makes it dump each
// thread's stack: a header per thread, then its frames, the innermost first.
constexpr std::string_view kStackHeader = "(most recent call first):";
constexpr std::string_view kFrameWord = "File \"";

// The words of the lines that say a stop was asked (diagnosis.hpp).
constexpr std::string_view kStopWords[] = {"CANCELLED AT", "muster: stopped by ",
                                           "passed on to them, as asked"};

// srun's line as it ends a step itself, after a task's bad end under --kill-on-bad-exit: "srun:
// Terminating StepId=4242.0" (with "launch/slurm: _step_signal: " in Slurm 23 and later;
// "srun: Terminating job step 4242.0" before 20.11).
constexpr std::string_view kSrunEndsStepWords[] = {"Terminating StepId=", "Terminating job step "};

bool srun_ends_step(std::string_view line) {
  if (line.find("srun: ") == std::string_view::npos) return false;
  for (std::string_view word : kSrunEndsStepWords)
    if (line.find(word) != std::string_view::npos) return true;
  return false;
}

// The start of muster's launcher's own lines on its stderr ("muster: job.toml:3: ...").
constexpr std::string_view kLauncherWord = "muster: ";

// Whether `line` is the launcher's, with or without srun -l's "3: " label.
bool launcher_line(std::string_view line) {
  return unlabelled(line).starts_with(kLauncherWord);
}

enum class stop { none, slurm, launcher };

// Who asked the stop `line` says: Slurm's "*** JOB 9 ON n1 CANCELLED AT 2026-11-27T09:40:01 ***"
// (scancel) or "... DUE TO JOB REQUEUE ***", not its time limit, node failure or preemption;
// muster's launcher's "stopped by SIGTERM" and "passed on to them, as asked". A step's "***
// STEP 9.0 ON n1 CANCELLED AT ... ***" after srun said it ends the step (`srun_ended_step`) is
// srun's own end of it after a task's bad end, which no one asked.
stop stop_asked(std::string_view line, bool srun_ended_step) {
  if (const auto at = line.find("CANCELLED AT "); at != std::string_view::npos) {
    if (srun_ended_step && line.find("*** STEP ") != std::string_view::npos) return stop::none;
    auto rest = line.substr(at + 13);
    rest = rest.substr(std::min(rest.find(' '), rest.size()));  // past the time
    while (rest.starts_with(' ')) rest.remove_prefix(1);
    return rest.starts_with("***") || rest.starts_with("DUE TO JOB REQUEUE") ? stop::slurm
                                                                             : stop::none;
  }
  return line.find("muster: stopped by ") != std::string_view::npos ||
                 line.find("passed on to them, as asked") != std::string_view::npos
             ? stop::launcher
             : stop::none;
}

// Whether `s` is a worker's end on a signal a stop sends: SIGINT, SIGUSR1, SIGUSR2, SIGTERM, as
// the signal or as the exit code 128 + it (a launcher that passed it on exits so), or SIGKILL
// (srun turns the SIGTERM of a cancel into SIGKILL for its tasks: finish() keeps those only for
// Slurm's stops).
bool stop_end(const log_signal& s) {
  if (s.facts.contains("root_cause")) return false;
  if (s.category == "worker_killed_sigkill") {
    const auto it = s.facts.find("signal");
    return it != s.facts.end() && it->second == "9";
  }
  if (s.category != "worker_failed_see_error_file") return false;
  const auto fact = [&](const char* key) {
    const auto it = s.facts.find(key);
    return it == s.facts.end() ? std::string() : it->second;
  };
  for (const int signal : {SIGINT, SIGUSR1, SIGUSR2, SIGTERM})
    if (fact("signal") == std::to_string(signal) ||
        fact("exit_code") == std::to_string(128 + signal))
      return true;
  return false;
}

// The end muster's launcher's line of the rank that failed first says ("muster: rank 1 on n1
// failed first (signal 15 (SIGTERM)); ...", "muster: rank 1 on n2 failed first: exit code 143;
// ..."), as that rank's end on that host; nullopt for any other line.
std::optional<log_signal> launcher_first_failure(std::string_view line) {
  line = unlabelled(line);
  const auto at = line.find(kFailedFirst);
  if (!line.starts_with(kLauncherWord) || at == std::string_view::npos) return std::nullopt;
  auto how = line.substr(at + kFailedFirst.size());
  how.remove_prefix(std::min<std::size_t>(2, how.size()));  // " (" or ": "
  log_signal s{"worker_failed_see_error_file", std::nullopt, {}};
  auto who = line.substr(kLauncherWord.size(), at - kLauncherWord.size());  // "rank 1 on n2"
  // the launcher's own line starts with the rank; any other that quotes one is not its word
  if (!who.starts_with("rank ")) return std::nullopt;
  s.rank = number_at(who.substr(5));
  if (const auto on = who.find(" on "); on != std::string_view::npos)
    s.facts["host"] = std::string(who.substr(on + 4, who.find(' ', on + 4) - on - 4));
  if (how.starts_with("signal ")) {
    const auto n = number_at(how.substr(7));
    if (!n) return std::nullopt;
    if (*n == SIGKILL) s.category = "worker_killed_sigkill";
    s.facts["signal"] = std::to_string(*n);
  } else if (how.starts_with("exit code ")) {
    const auto n = number_at(how.substr(10));
    if (!n) return std::nullopt;
    s.facts["exit_code"] = std::to_string(*n);
  } else {
    return std::nullopt;
  }
  return s;
}

// Whether `line` is part of a stop, for the suspicious lines: a line that says a stop was asked
// (whoever asked it), srun's task that a stop ended ("srun: error: n1: tasks 0-1: Terminated"),
// or muster's launcher's first failure on a stop's signal (stop_end).
bool stop_part(std::string_view line) {
  if (stop_asked(line, false) != stop::none) return true;
  auto text = line;
  while (text.ends_with(' ')) text.remove_suffix(1);
  if (text.find("srun: error: ") != std::string_view::npos && text.ends_with(": Terminated"))
    return true;
  const auto end = launcher_first_failure(line);
  return end && stop_end(*end);
}

// The name of the variable torchrun's contract gives every worker: in a dump of the
// environment, no error.
constexpr std::string_view kErrorFileVariable = "TORCHELASTIC_ERROR_FILE";

// The exception a rank's Python ends with on Ctrl-C (SIGINT): a traceback that ends in it is
// the stop's.
constexpr std::string_view kInterrupted = "KeyboardInterrupt";

bool suspicious_line(std::string_view line) {
  std::string text(line);
  for (auto at = text.find(kErrorFileVariable); at != std::string::npos;
       at = text.find(kErrorFileVariable, at))
    text.erase(at, kErrorFileVariable.size());
  for (std::string_view word : kSuspiciousWords)
    if (text.find(word) != std::string::npos) return true;
  return false;
}

bool has_fact(const finding& f, const char* key, std::string_view value) {
  const auto it = f.facts.find(key);
  return it != f.facts.end() && it->second == value;
}

bool worker_death(const finding& f) {
  return f.category == "worker_killed_sigkill" || f.category == "worker_failed_see_error_file";
}

// Which finding is the root (diagnosis.hpp): lower first.
int root_order(const finding& f) {
  const auto& c = f.category;
  if (c == "nccl_timeout") return 4;
  if (c == "hang_watchdog_stuck") return has_fact(f, "source", "muster") ? 2 : 6;
  if (worker_death(f)) {
    if (has_fact(f, "root_cause", "yes")) return 1;
    if (has_fact(f, "srun_ended_step", "yes")) return 5;  // srun ended it after another's end
    return f.ranks.empty() ? 5 : 2;  // a death of no known rank may be any timed-out rank's
  }
  // a network error is often a peer's death seen from the other end
  if (c == "nccl_system_error") return has_fact(f, "sub_cause", "shared memory") ? 0 : 3;
  return 0;  // a failure that names its cause
}

evidence_line evidence_of(const std::string& file, std::int64_t number, std::string_view text) {
  return {file, number, std::string(text.substr(0, kMaxEvidenceText)), time_of_line(text)};
}

// Whether a signal says the same thing as finding `f` (one finding per category; a timeout
// per collective: its op and sequence number).
bool same(const finding& f, const log_signal& s) {
  if (f.category != s.category) return false;
  auto fact = [](const std::map<std::string, std::string>& facts, const char* key) {
    const auto it = facts.find(key);
    return it == facts.end() ? std::string() : it->second;
  };
  // a launcher's end is its own finding: it follows its ranks' (diagnoser::srun_tasks); so is
  // srun's SIGKILL of a task after another's end (--kill-on-bad-exit)
  for (const char* key : {"launcher", "srun_ended_step"})
    if (fact(f.facts, key) != fact(s.facts, key)) return false;
  if (s.category != "nccl_timeout") return true;
  // "Timeout at NCCL work: 1042" names no op: the same as the watchdog's line of seq 1042
  const auto op = fact(f.facts, "op"), other = fact(s.facts, "op");
  return fact(f.facts, "seq") == fact(s.facts, "seq") &&
         (op == other || op.empty() || other.empty());
}

// Whether `a` happened before `b`: by their times when both have one.
bool earlier(const finding& a, const finding& b) {
  return a.first_time_s && b.first_time_s && *a.first_time_s < *b.first_time_s;
}

// The root among `findings` (diagnosis.hpp): the lowest root_order, among equals the earliest.
// Where that names no cause of its own (a network error, a timeout, a death: order 3 and up)
// and not the rank the launcher saw fail first, that rank's finding is the root: the others'
// errors are what its end did to them (a peer's connection closed, a collective it left).
std::vector<finding>::iterator pick_root(std::vector<finding>& findings,
                                         std::optional<int> first_failed) {
  const auto lowest = [&](auto keep) {
    auto best = findings.end();
    for (auto it = findings.begin(); it != findings.end(); ++it)
      if (keep(*it) && (best == findings.end() || root_order(*it) < root_order(*best) ||
                        (root_order(*it) == root_order(*best) && earlier(*it, *best))))
        best = it;
    return best;
  };
  const auto best = lowest([](const finding&) { return true; });
  if (!first_failed || root_order(*best) < 3 || best->ranks.contains(*first_failed)) return best;
  const auto its = lowest([&](const finding& f) { return f.ranks.contains(*first_failed); });
  return its == findings.end() ? best : its;
}

// The timeouts other than `root` as one nccl_timeout_cascade finding, in the place of the
// first of them: facts from the earliest, ranks and counts of all, evidence up to kMaxEvidence.
void merge_cascades(std::vector<finding>& findings, const finding* root) {
  std::optional<std::size_t> into;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    auto& f = findings[i];
    if (f.category != "nccl_timeout" || &f == root) continue;
    f.category = "nccl_timeout_cascade";
    if (!into) {
      into = i;
      continue;
    }
    auto& m = findings[*into];
    if (earlier(f, m)) {
      m.facts = f.facts;
      m.first_time_s = f.first_time_s;
    }
    m.count += f.count;
    m.ranks.insert(f.ranks.begin(), f.ranks.end());
    m.hosts.insert(f.hosts.begin(), f.hosts.end());
    for (auto& e : f.evidence)
      if (m.evidence.size() < kMaxEvidence) m.evidence.push_back(e);
    f.category.clear();  // merged: removed below
  }
  std::erase_if(findings, [](const finding& f) { return f.category.empty(); });
}

}  // namespace

void diagnoser::add_line(const std::string& file, std::int64_t number, std::string_view line,
                         std::optional<int> file_rank) {
  if (auto failure = elastic_[file].add_line(number, line)) {
    add_elastic_failure(file, *failure);
    return;
  }
  if (srun_ends_step(line)) srun_ended_step_.insert(file);
  if (!stopped_as_asked_) {
    if (const auto who = stop_asked(line, srun_ended_step_.contains(file)); who != stop::none) {
      stopped_as_asked_ = evidence_of(file, number, line);
      stopped_by_slurm_ = who == stop::slurm;
    }
  }
  const bool node_start = is_node_start_line(unlabelled(line));
  if (node_start && !srun_tasks_) launcher_files_.insert(file);
  const bool launchers =
      srun_tasks_ ? *srun_tasks_ == srun_tasks::launchers : launcher_files_.contains(file);
  add_traceback_line(file, number, line, launchers, file_rank);
  add_stack_line(file, number, line, launchers, file_rank);
  if (line.find("failed (exitcode: ") != std::string_view::npos) torchelastic_ = true;
  // in launchers' output srun -l's label is the node's task, not a rank: "1: [rank 9] ..."
  auto signal = match_log_line(launchers ? unlabelled(line) : line);
  // the launcher's word on which rank failed first, what a log without the run has of it
  if (!signal) signal = launcher_first_failure(line);
  if (launcher_line(line) && !node_start &&
      line.find("restarting the ranks") == std::string_view::npos) {
    // its last line says why it ended, unless that line is a finding of its own (a rendezvous
    // that timed out): then the launcher's end is that finding's knock-on
    const auto key = std::make_pair(file, std::string(srun_label(line)));
    if (signal)
      launcher_said_.erase(key);
    else
      launcher_said_[key] = evidence_of(file, number, line);
  }
  if (!signal) {
    if (findings_.empty() && suspicious_line(line)) {
      const auto keep = [&](std::vector<evidence_line>& lines) {
        if (lines.size() == kMaxSuspicious) lines.erase(lines.begin());
        lines.push_back(evidence_of(file, number, line));
      };
      keep(suspicious_);
      if (!stop_part(line)) keep(suspicious_unstopped_);
    }
    return;
  }
  // srun's own SIGKILL of the tasks left after it ended the step: a knock-on, not one with a
  // kill before it (--kill-on-bad-exit)
  if (signal->category == "worker_killed_sigkill" && signal->facts.contains("srun_tasks") &&
      srun_ended_step_.contains(file))
    signal->facts["srun_ended_step"] = "yes";
  if (launchers && signal->facts.contains("srun_tasks")) {
    signal->facts["launcher"] = "yes";  // a node's launcher, not a rank
    signal->rank.reset();
    signal->more_ranks.clear();
    // its last line before it ended says why, when nothing else does (a refused job file):
    // its task's under srun -l, else the file's last unlabelled one
    auto said = launcher_said_.find({file, signal->facts["srun_tasks"]});
    if (said == launcher_said_.end()) said = launcher_said_.find({file, ""});
    if (said != launcher_said_.end()) {
      signal->facts["launcher_said"] = said->second.text;
      add_signal(*signal, said->second);
      launcher_said_.erase(said);  // said once: a later end (a requeue's) needs its own
    }
  } else if (!signal->rank) {
    signal->rank = file_rank;
  }
  add_signal(std::move(*signal), evidence_of(file, number, line));
}

void diagnoser::add_traceback_line(const std::string& file, std::int64_t number,
                                   std::string_view line, bool launchers,
                                   std::optional<int> file_rank) {
  if (launchers) line = unlabelled(line);  // the node's task, not a rank
  const auto text = rank_text(line);
  const bool start = traceback_start(text);
  const bool interrupted = text.starts_with(kInterrupted);
  if (!start && !interrupted && !exception_line(text)) return;
  auto rank = rank_of_line(line.substr(std::min(line.find_first_not_of(' '), line.size())));
  if (!rank) rank = file_rank;
  if (!rank) return;
  const auto key = std::make_pair(file, *rank);
  if (start) {
    traceback_open_[key] = evidence_of(file, number, line);
    return;
  }
  const auto open = traceback_open_.find(key);
  if (open == traceback_open_.end()) return;  // an error word no traceback ends
  if (interrupted) {  // Ctrl-C's: part of the stop, not a suspicious line after it
    std::erase_if(suspicious_unstopped_, [&](const evidence_line& e) {
      return e.file == open->second.file && e.line == open->second.line;
    });
    traceback_open_.erase(open);
    return;
  }
  const bool own_log = file_rank == rank;
  if (const auto seen = raised_.find(*rank);
      seen == raised_.end() || own_log || !seen->second.own_log)
    raised_[*rank] = {evidence_of(file, number, line),
                      std::string(text.substr(0, kMaxEvidenceText)), open->second, own_log};
  traceback_open_.erase(open);
}

void diagnoser::add_stack_line(const std::string& file, std::int64_t number, std::string_view line,
                               bool launchers, std::optional<int> file_rank) {
  if (launchers) line = unlabelled(line);
  const auto text = rank_text(line);
  const bool header = text.find(kStackHeader) != std::string_view::npos;
  if (!header && text.find(kFrameWord) == std::string_view::npos) return;
  auto rank = rank_of_line(line.substr(std::min(line.find_first_not_of(' '), line.size())));
  if (!rank) rank = file_rank;
  if (!rank) return;
  const auto key = std::make_pair(file, *rank);
  if (header) {
    stack_open_[key] = text.find("Current thread") != std::string_view::npos;
    return;
  }
  const auto open = stack_open_.find(key);
  if (open == stack_open_.end()) return;  // a traceback's frame, not a dump's
  const bool current = open->second;
  if (const auto at = stood_at_.find(*rank); at == stood_at_.end() || current || !at->second.second)
    stood_at_[*rank] = {evidence_of(file, number, line), current};
  stack_open_.erase(open);  // its innermost frame is the one that says where it stood
}

namespace {

// Whether a stack's innermost frame stands in a collective (torch.distributed's, a Work's wait
// among them, or a call of a collective's name): a rank waiting there waits on another. A bare
// `wait` is no collective: a data loader's queue waits in threading.py.
bool in_collective(std::string_view frame) {
  if (frame.find("/torch/distributed/") != std::string_view::npos) return true;
  static constexpr std::string_view kCalls[] = {
      " in all_reduce",
      " in all_gather",
      " in reduce_scatter",
      " in all_to_all",
      " in broadcast",
      " in barrier",
      " in monitored_barrier",
      " in all_gather_into_tensor",
      " in reduce_scatter_tensor",
      " in all_to_all_single",
  };
  while (!frame.empty() && (frame.back() == ' ' || frame.back() == '\r')) frame.remove_suffix(1);
  return std::any_of(std::begin(kCalls), std::end(kCalls),
                     [&](std::string_view call) { return frame.ends_with(call); });
}

}  // namespace

void diagnoser::quote_stack(finding& f) const {
  if (f.category != "hang_watchdog_stuck" || !has_fact(f, "source", "muster")) return;
  // ranks hung at once, with nothing in their beats to tell them apart: the stacks do. Those
  // that stood outside a collective are the hang, those in one waited on them
  if (f.ranks.size() > 1) {
    std::vector<int> outside, inside;
    for (const int rank : f.ranks)
      if (const auto at = stood_at_.find(rank); at != stood_at_.end())
        (in_collective(at->second.first.text) ? inside : outside).push_back(rank);
    if (!outside.empty() && !inside.empty() && outside.size() + inside.size() == f.ranks.size()) {
      f.ranks = std::set<int>(outside.begin(), outside.end());
      f.waited_ranks = std::set<int>(inside.begin(), inside.end());
      f.facts["waited_in_collective"] = fmt::format("{}", fmt::join(inside, ", "));
    }
  }
  for (const int rank : f.ranks) {
    const auto at = stood_at_.find(rank);
    if (at == stood_at_.end()) continue;
    const auto& frame = at->second.first;
    if (!f.facts.contains("stood_at")) {
      const auto where = rank_text(frame.text);
      f.facts["stood_at"] =
          std::string(where.substr(std::min(where.find_first_not_of(' '), where.size())));
      f.facts["stood_at_rank"] = std::to_string(rank);
    }
    f.evidence.insert(f.evidence.begin(), frame);
    if (f.evidence.size() > kMaxEvidence) f.evidence.pop_back();
  }
}

void diagnoser::quote_exception(finding& f) const {
  if (f.category != "worker_failed_see_error_file") return;
  for (const char* said : {"launcher", "error", "signal", "signal_name"})
    if (f.facts.contains(said)) return;  // a launcher, an error file, a crash
  for (const int rank : f.ranks) {
    const auto r = raised_.find(rank);
    if (r == raised_.end()) continue;
    f.facts["error"] = r->second.text;
    if (f.ranks.size() > 1) f.facts["error_rank"] = std::to_string(rank);
    f.facts["traceback_file"] = r->second.start.file;
    f.facts["traceback_line"] = std::to_string(r->second.start.line);
    if (r->second.own_log) f.facts["traceback_own_log"] = "yes";
    f.evidence.insert(f.evidence.begin(), r->second.exception);
    if (f.evidence.size() > kMaxEvidence) f.evidence.pop_back();
    ++f.count;
    return;
  }
}

void diagnoser::add_signal(log_signal signal, evidence_line evidence) {
  if (stop_end(signal)) {
    stop_ends_.push_back({std::move(signal), std::move(evidence), ++signals_read_});
    return;
  }
  add_now(std::move(signal), std::move(evidence), ++signals_read_);
}

void diagnoser::add_now(log_signal signal, evidence_line evidence, std::int64_t read) {
  auto it = std::find_if(findings_.begin(), findings_.end(),
                         [&](const finding& f) { return same(f, signal); });
  if (it == findings_.end()) {
    finding f;
    f.category = signal.category;
    f.facts = signal.facts;
    f.first_time_s = evidence.time_s;
    f.first_read = read;
    findings_.push_back(std::move(f));
    it = findings_.end() - 1;
  } else {
    std::map<std::string, std::string> keep;  // what decides the root, from any line
    for (const char* key : {"source", "root_cause"}) {
      if (auto v = it->facts.find(key); v != it->facts.end()) keep[key] = v->second;
      if (auto v = signal.facts.find(key); v != signal.facts.end()) keep[key] = v->second;
    }
    if (evidence.time_s && (!it->first_time_s || *evidence.time_s < *it->first_time_s)) {
      it->facts = signal.facts;  // the earliest line speaks for the finding
      it->first_time_s = evidence.time_s;
    }
    for (auto& [key, value] : keep) it->facts[key] = value;
  }
  ++it->count;
  if (signal.rank) it->ranks.insert(*signal.rank);
  it->ranks.insert(signal.more_ranks.begin(), signal.more_ranks.end());
  // a line that names no op (or job, node, Slurm's word) fills in from another
  for (const char* key : {"op", "timeout_ms", "job", "node_rank", "slurm", "launcher_gone"})
    if (auto v = signal.facts.find(key); v != signal.facts.end() && !it->facts.count(key))
      it->facts[key] = v->second;
  if (auto host = signal.facts.find("host"); host != signal.facts.end())
    it->hosts.insert(host->second);
  it->hosts.insert(signal.hosts.begin(), signal.hosts.end());
  if (it->evidence.size() < kMaxEvidence) {
    evidence.text.resize(std::min(evidence.text.size(), kMaxEvidenceText));
    it->evidence.push_back(std::move(evidence));
  }
}

// A worker torchelastic reports failed: its error file, when this host has it, decides the
// category (a CUDA OOM in the file is a cuda_oom); else its exit says killed or failed.
void diagnoser::add_elastic_failure(const std::string& file, const elastic_failure& failure) {
  torchelastic_ = true;
  const auto evidence = evidence_of(file, failure.line, "traceback : " + failure.traceback);
  auto with_worker = [&](log_signal s) {
    s.rank = failure.rank;
    if (!failure.host.empty()) s.facts["host"] = failure.host;
    if (failure.root_cause) s.facts["root_cause"] = "yes";
    if (failure.exit_code) s.facts["exit_code"] = std::to_string(*failure.exit_code);
    if (!failure.error_file.empty()) s.facts["error_file"] = failure.error_file;
    return s;
  };
  std::optional<worker_error> error;
  if (!failure.error_file.empty()) {
    try {
      error = read_worker_error(failure.error_file);
    } catch (const std::exception&) {  // unreadable: said below as missing
    }
  }
  const std::string first_line =
      error ? error->message.substr(0, std::min(error->message.find('\n'), kMaxEvidenceText)) : "";
  if (error) {
    // the message's lines through the classifier: the first that says something decides
    std::string_view message = error->message;
    std::int64_t number = 0;
    while (!message.empty()) {
      const auto nl = message.find('\n');
      const auto line = message.substr(0, nl);
      ++number;
      if (auto s = match_log_line(line)) {
        add_signal(with_worker(std::move(*s)), evidence_of(failure.error_file, number, line));
        add_signal(
            with_worker(log_signal{"worker_failed_see_error_file", {}, {{"error", first_line}}}),
            evidence);
        return;
      }
      message = nl == std::string_view::npos ? std::string_view() : message.substr(nl + 1);
    }
  }
  const bool killed =
      failure.exit_code == -9 || failure.traceback.find("SIGKILL") != std::string::npos;
  if (!killed && failure.exit_code == -15 && !failure.root_cause) return;  // stopped by its agent
  auto s = with_worker(
      log_signal{killed ? "worker_killed_sigkill" : "worker_failed_see_error_file", {}, {}});
  if (error) {
    s.facts["error"] = first_line;
  } else if (!failure.error_file.empty()) {
    s.facts["error_file_missing"] = "yes";
  } else {
    s.facts["traceback"] = failure.traceback;
  }
  add_signal(std::move(s), evidence);
}

std::span<const std::string_view> diagnoser::keywords() {
  static const std::vector<std::string_view> words = [] {
    std::vector<std::string_view> out(signal_keywords().begin(), signal_keywords().end());
    out.insert(out.end(), elastic_failure_reader::keywords().begin(),
               elastic_failure_reader::keywords().end());
    out.insert(out.end(), std::begin(kSuspiciousWords), std::end(kSuspiciousWords));
    out.insert(out.end(), std::begin(kStopWords), std::end(kStopWords));
    out.insert(out.end(), std::begin(kSrunEndsStepWords), std::end(kSrunEndsStepWords));
    out.push_back(kLauncherWord);
    out.push_back(kExceptionWord);
    out.push_back(kInterrupted);
    out.push_back(kStackHeader);
    out.push_back(kFrameWord);
    return out;
  }();
  return words;
}

diagnosis diagnoser::finish() const {
  // the ends no stop explains are failures: all where none was asked; the SIGKILLs where the
  // launcher, not Slurm, stopped the ranks
  const auto unexplained = [&](const log_signal& s) {
    return !stopped_as_asked_ || (!stopped_by_slurm_ && s.category == "worker_killed_sigkill");
  };
  if (std::any_of(stop_ends_.begin(), stop_ends_.end(),
                  [&](const auto& end) { return unexplained(end.signal); })) {
    diagnoser all = *this;
    all.stop_ends_.clear();
    for (const auto& end : stop_ends_)
      if (unexplained(end.signal)) all.add_now(end.signal, end.evidence, end.read);
    return all.finish();
  }
  diagnosis d;
  d.lines_read = lines_;
  d.stopped_as_asked = stopped_as_asked_;
  d.findings = findings_;
  // in the order they were read: a held end (one a stop would explain) keeps its place
  std::stable_sort(d.findings.begin(), d.findings.end(),
                   [](const finding& a, const finding& b) { return a.first_read < b.first_read; });
  for (auto& f : d.findings) {
    if (planned_bytes_ > 0 && (f.category == "cuda_oom" || f.category == "nccl_oom"))
      f.facts["planned"] = format_bytes(planned_bytes_);
    if (f.category == "cuda_oom")
      for (const auto& [key, value] : memory_settings_) f.facts[key] = value;
    for (const auto rank : f.ranks)
      if (auto host = rank_hosts_.find(rank); host != rank_hosts_.end())
        f.hosts.insert(host->second);
    quote_exception(f);
    quote_stack(f);
  }
  // a worker's death is said already where another finding says what happened to each of its
  // ranks (the store's failed rank beside the OOM in its log; ranks the watchdog aborted after
  // their timeout)
  std::set<int> explained;
  for (const auto& f : d.findings) {
    if (worker_death(f)) continue;
    explained.insert(f.ranks.begin(), f.ranks.end());
    explained.insert(f.waited_ranks.begin(), f.waited_ranks.end());
  }
  std::erase_if(d.findings, [&](const finding& f) {
    return worker_death(f) && !f.ranks.empty() &&
           std::includes(explained.begin(), explained.end(), f.ranks.begin(), f.ranks.end());
  });
  // the root (diagnosis.hpp); beside another root the timeouts are its knock-on effect,
  // wherever their lines stand: the ranks that waited on the failed one time out, and their
  // logs may be read first.
  if (!d.findings.empty()) {
    auto root = pick_root(d.findings, first_failed_);
    root->root = true;
    merge_cascades(d.findings, root->category == "nccl_timeout" ? &*root : nullptr);
    root =
        std::find_if(d.findings.begin(), d.findings.end(), [](const finding& f) { return f.root; });
    std::rotate(d.findings.begin(), root, root + 1);
  }
  // every category is listed (categories.hpp): a new one cannot be added without its meaning
  for (const auto& f : d.findings) check_finding_category(f.category);
  explain_context context{
      world_size_,        {},        {}, torchelastic_, muster_sbatch_, slurm_job_, time_limit_s_,
      checkpoint_lead_s_, num_nodes_};
  for (const auto& f : d.findings) {
    context.categories.insert(f.category);
    if (f.category == "nccl_timeout" || f.category == "nccl_timeout_cascade")
      context.timed_out.insert(f.ranks.begin(), f.ranks.end());
  }
  for (auto& f : d.findings) explain(f, context);
  // after a stop asked, its own lines and the ends it explains are no suspicious lines
  if (d.findings.empty()) d.suspicious = stopped_as_asked_ ? suspicious_unstopped_ : suspicious_;
  return d;
}

}  // namespace muster::launcher::diagnose

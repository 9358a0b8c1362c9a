// What a run directory's store adds to a diagnosis: see run_findings.hpp.
#include "launcher/diagnose/run_findings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "common/byte_size.hpp"
#include "common/run_dir.hpp"
#include "launcher/diagnose/line_fields.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/run_recorder.hpp"

namespace muster::launcher::diagnose {
namespace {

// "<run dir>/node-<host>.db" where the run has that one node file, else "<run dir>/node-*.db":
// the store's row numbers count the rows of every node file merged.
std::string store_files(const status::run_status& run) {
  std::filesystem::path file = run.dir / "node-*.db";
  try {
    if (const auto nodes = store::run_paths(run.dir).node_dbs(); nodes.size() == 1)
      file = nodes.front();
  } catch (const std::exception&) {  // not listable: keep the pattern
  }
  return file.lexically_normal().string();
}

// The category of an error file whose message no classifier line matched, from its kind.
const char* category_of_kind(const std::string& kind) {
  if (kind == "oom") return "cuda_oom";
  if (kind == "collective_timeout") return "nccl_timeout";
  return "worker_failed_see_error_file";
}

// A rank's death the store records without its cause: killed by SIGKILL, else failed, with
// its signal (else exit code) and pid ("" when unknown) as facts.
log_signal death_of(std::int64_t rank, std::optional<std::int64_t> signal,
                    std::optional<std::int64_t> exit_code, const std::string& pid) {
  log_signal s{signal == 9 ? "worker_killed_sigkill" : "worker_failed_see_error_file",
               static_cast<int>(rank),
               {}};
  if (signal)
    s.facts["signal"] = std::to_string(*signal);
  else if (exit_code)
    s.facts["exit_code"] = std::to_string(*exit_code);
  if (!pid.empty()) s.facts["pid"] = pid;
  return s;
}

double seconds(store::epoch_ms ms) {
  return static_cast<double>(ms) / 1000;
}

// The q-quantile of `v`, interpolated between neighbours (q = 0.5: the median).
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const auto below = static_cast<std::size_t>(at);
  if (below + 1 >= v.size()) return v.back();
  return v[below] + (at - double(below)) * (v[below + 1] - v[below]);
}

}  // namespace

void add_store_findings(diagnoser& d, const status::run_status& run,
                        const std::vector<store::event_record>& events) {
  std::map<int, std::string> hosts;
  for (const auto& r : run.ranks) hosts[static_cast<int>(r.rank.rank)] = r.rank.host;
  d.set_rank_hosts(hosts);
  const auto node_files = store_files(run);
  const auto store_file = [&](const char* table) {
    return fmt::format("{} ({})", node_files, table);
  };

  std::set<std::int64_t> hung;
  std::int64_t number = 0;
  for (const auto& e : events) {
    ++number;
    // another node's launcher gone with its ranks, as this node's launcher was told
    if (e.kind == "remote_failure")
      if (auto s = match_log_line(e.message); s && s->category == "node_failure")
        d.add_signal(std::move(*s), {store_file("events"), number, e.message, seconds(e.time_ms)});
    if (e.kind != "hang" || !e.rank) continue;
    hung.insert(*e.rank);
    d.add_signal(muster_hang_signal(e.message, static_cast<int>(*e.rank)),
                 {store_file("events"), number, e.message, seconds(e.time_ms)});
  }

  std::set<std::int64_t> with_error;
  number = 0;
  for (const auto& e : run.errors) {
    ++number;
    with_error.insert(e.rank);
    std::optional<log_signal> signal;
    for (std::size_t at = 0; at < e.message.size() && !signal;) {
      const auto nl = std::min(e.message.find('\n', at), e.message.size());
      signal = match_log_line(std::string_view(e.message).substr(at, nl - at));
      at = nl + 1;
    }
    if (!signal) signal = log_signal{category_of_kind(e.kind), std::nullopt, {}};
    signal->rank = static_cast<int>(e.rank);
    if (!e.phase.empty()) signal->facts["phase"] = e.phase;
    if (e.step) signal->facts["step"] = std::to_string(*e.step + 1);
    if (signal->category == "worker_failed_see_error_file") {
      signal->facts["error"] =
          e.message.substr(0, std::min<std::size_t>(e.message.find('\n'), 400));
      signal->facts["error_kind"] = e.kind;  // bad_input: the job's input, not the program
    }
    d.add_signal(std::move(*signal), {store_file("errors"), number, e.message, seconds(e.time_ms)});
  }

  // the launchers' first failures: what each rank printed last, and the latest attempt's
  // rank, where diagnoser looks for the root first
  std::map<std::int64_t, std::string> last_output;
  for (const auto& e : events) {
    if (e.kind != "first_failure" || !e.rank) continue;
    if (auto said = last_output_tail(e.message)) last_output[*e.rank] = std::move(*said);
    if (!hung.contains(*e.rank)) d.set_first_failed_rank(static_cast<int>(*e.rank));
  }
  number = 0;
  for (const auto& r : run.ranks) {
    ++number;
    const auto& rank = r.rank;
    if (rank.state != store::rank_state::failed || hung.contains(rank.rank)) continue;
    if (rank.signal != 9 && with_error.contains(rank.rank)) continue;  // its error file said why
    const std::string how = rank.signal      ? fmt::format("ended by signal {}", *rank.signal)
                            : rank.exit_code ? fmt::format("exited with code {}", *rank.exit_code)
                                             : "failed";
    auto s =
        death_of(rank.rank, rank.signal, rank.exit_code, rank.pid ? std::to_string(*rank.pid) : "");
    if (const auto said = last_output.find(rank.rank); said != last_output.end())
      s.facts["last_output"] = said->second;
    d.add_signal(std::move(s), {store_file("ranks"), number,
                                fmt::format("rank {} on {} {}", rank.rank, rank.host, how),
                                seconds(rank.updated_ms)});
  }

  // A lost run (run_status.hpp): its launcher ended without a word and its ranks with it (they
  // die with their launcher: PR_SET_PDEATHSIG), so the ranks table still says running.
  if (run.lost) {
    number = 0;
    for (const auto& r : run.ranks) {
      ++number;
      if (!r.gone) continue;
      log_signal s{"worker_killed_sigkill", static_cast<int>(r.rank.rank), {{"source", "lost"}}};
      if (r.rank.pid) s.facts["pid"] = std::to_string(*r.rank.pid);
      if (!run.lost_why.empty()) s.facts["lost_why"] = run.lost_why;
      d.add_signal(std::move(s),
                   {store_file("ranks"), number,
                    run.lost_why.empty()
                        ? fmt::format("rank {} on {} recorded running; no process has pid {}",
                                      r.rank.rank, r.rank.host, r.rank.pid.value_or(0))
                        : fmt::format("rank {} on {} recorded running; {}", r.rank.rank,
                                      r.rank.host, run.lost_why),
                    seconds(r.rank.updated_ms)});
    }
  }

  // A rank that failed first in an attempt before a restart: the ranks table holds only the
  // last attempt's processes, the events every attempt's first failure ("rank 1 on gpu-a07
  // (pid 4242) failed first: signal 9 (SIGKILL); ..."). One the ranks table still shows failed
  // (the same pid) was taken above.
  number = 0;
  for (const auto& e : events) {
    ++number;
    if (e.kind != "first_failure" || !e.rank || hung.contains(*e.rank)) continue;
    const auto pid = after(e.message, "(pid ", ")");
    const bool shown = std::any_of(run.ranks.begin(), run.ranks.end(), [&](const auto& r) {
      return r.rank.rank == *e.rank && r.rank.state == store::rank_state::failed && r.rank.pid &&
             std::to_string(*r.rank.pid) == pid;
    });
    if (shown) continue;
    const auto how = between(e.message, std::string(kFailedFirst) + ": ", {";"});
    const auto signal = how.starts_with("signal ") ? number_at(how.substr(7)) : std::nullopt;
    if (signal != 9 && with_error.contains(*e.rank)) continue;  // its error file said why
    const auto code = number_at(between(how, "exit code ", {" "}));
    auto s = death_of(*e.rank, signal ? std::optional<std::int64_t>(*signal) : std::nullopt,
                      code ? std::optional<std::int64_t>(*code) : std::nullopt, pid);
    s.facts["restarted"] = "yes";
    d.add_signal(std::move(s), {store_file("events"), number, e.message, seconds(e.time_ms)});
  }
}

rank_analysis analyse_ranks(const status::run_status& run, std::int64_t planned_mem_bytes) {
  rank_analysis a;
  a.planned_mem_bytes = planned_mem_bytes;
  std::map<std::int64_t, std::vector<double>> times, busy;
  std::map<std::int64_t, std::int64_t> peaks;
  std::map<std::int64_t, std::string> devices;
  bool every_wait = true;  // every step says how long it waited in collectives
  // each rank's first step of each attempt (a resume's is past 0): the lowest it recorded from
  // that attempt's start on, before the next's
  std::vector<store::epoch_ms> starts{0};
  starts.insert(starts.end(), run.attempt_starts.begin(), run.attempt_starts.end());
  std::sort(starts.begin(), starts.end());
  std::set<std::pair<std::int64_t, std::int64_t>> first;  // (rank, step)
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto end = i + 1 < starts.size() ? starts[i + 1] : std::numeric_limits<store::epoch_ms>::max();
    std::map<std::int64_t, std::int64_t> lowest;
    for (const auto& s : run.history)
      if (s.time_ms >= starts[i] && s.time_ms < end)
        if (auto [at, added] = lowest.try_emplace(s.rank, s.step); !added)
          at->second = std::min(at->second, s.step);
    for (const auto& [rank, step] : lowest) first.emplace(rank, step);
  }
  for (const auto& s : run.history) {
    peaks[s.rank] = std::max({peaks[s.rank], s.peak_mem_bytes, s.mem_bytes});
    if (!s.mem_device.empty()) devices[s.rank] = s.mem_device;
    // the first step of a run (and of a resume) carries start-up work: not a straggler's sign
    if (s.step == 0 || first.contains({s.rank, s.step}) || !std::isfinite(s.step_time_s)) continue;
    times[s.rank].push_back(s.step_time_s);
    if (std::isfinite(s.comm_wait_s))
      busy[s.rank].push_back(std::max(0.0, s.step_time_s - s.comm_wait_s));
    else
      every_wait = false;
  }
  std::vector<double> step_medians, busy_medians;
  for (const auto& [rank, t] : times) step_medians.push_back(quantile(t, 0.5));
  for (const auto& [rank, t] : busy) busy_medians.push_back(quantile(t, 0.5));
  a.median_step_s = quantile(step_medians, 0.5);
  a.by_busy = every_wait && !busy.empty();
  a.median_busy_s = a.by_busy ? quantile(busy_medians, 0.5) : std::nan("");
  const double median_pace = a.by_busy ? a.median_busy_s : a.median_step_s;
  for (const auto& r : run.ranks) {
    const auto rank = r.rank.rank;
    if (r.heartbeat_age_s && r.rank.state == store::rank_state::running &&
        (!a.oldest_heartbeat_rank || *r.heartbeat_age_s > a.oldest_heartbeat_age_s)) {
      a.oldest_heartbeat_rank = rank;
      a.oldest_heartbeat_age_s = *r.heartbeat_age_s;
    }
    if (peaks[rank] > a.peak_mem_bytes) {
      a.peak_mem_bytes = peaks[rank];
      a.peak_mem_rank = rank;
      a.peak_mem_device = devices[rank];
    }
    const auto t = times.find(rank);
    if (t == times.end()) continue;
    rank_timing rt;
    rt.rank = rank;
    rt.host = r.rank.host;
    rt.steps = static_cast<std::int64_t>(t->second.size());
    rt.median_step_s = quantile(t->second, 0.5);
    rt.p90_step_s = quantile(t->second, 0.9);
    rt.median_busy_s = a.by_busy ? quantile(busy[rank], 0.5) : std::nan("");
    rt.heartbeat_age_s = r.heartbeat_age_s;
    rt.peak_mem_bytes = peaks[rank];
    const double pace = a.by_busy ? rt.median_busy_s : rt.median_step_s;
    if (median_pace > 0) rt.slower = pace / median_pace - 1;
    rt.straggler = rt.slower > kStragglerSlowdown;
    if (rt.straggler) a.stragglers.push_back(rank);
    a.ranks.push_back(rt);
  }
  return a;
}

std::string memory_words(const rank_analysis& a) {
  const bool cpu = a.peak_mem_device == "cpu";
  std::string out;
  if (a.peak_mem_rank) {
    out = fmt::format("measured peak {} on rank {}", format_bytes(a.peak_mem_bytes),
                      *a.peak_mem_rank);
    if (a.peak_mem_device == "cuda") out += " (GPU memory PyTorch's allocator reserved)";
    if (cpu) out += " (resident memory, on the CPU)";
  }
  if (a.planned_mem_bytes > 0) {
    if (!out.empty()) out += "; ";
    if (cpu && !a.peak_mem_rank)
      return out + fmt::format("the planner estimated {} of a rank's tensors, on the CPU",
                               format_bytes(a.planned_mem_bytes));
    out += cpu ? fmt::format(
                     "the planner estimated {} of a rank's tensors (resident memory "
                     "also holds the program, LibTorch and the allocator's cache, so "
                     "the two do not compare on the CPU)",
                     format_bytes(a.planned_mem_bytes))
               : fmt::format("the planner estimated {} a GPU", format_bytes(a.planned_mem_bytes));
  }
  return out;
}

}  // namespace muster::launcher::diagnose

// Reading a run's status from its directory: see run_status.hpp.
#include "launcher/status/run_status.hpp"

#include <fmt/format.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/heartbeat_line.hpp"
#include "common/job_config.hpp"
#include "common/launcher_lock.hpp"
#include "common/proc_stat.hpp"
#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "common/step_line.hpp"
#include "common/worker_error.hpp"
#include "launcher/heartbeat.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/local_run.hpp"
#include "launcher/plan/layout_resolve.hpp"

namespace muster::launcher::status {
namespace {

namespace fs = std::filesystem;

std::optional<double> age_of(const fs::path& file, store::epoch_ms now) {
  std::error_code ec;
  const auto mtime = fs::last_write_time(file, ec);
  if (ec) return std::nullopt;
  const auto when = std::chrono::time_point_cast<std::chrono::milliseconds>(
      std::chrono::file_clock::to_sys(mtime));
  return std::max(0.0, double(now - when.time_since_epoch().count()) / 1000.0);
}

// "tp 1 cp 1 dp 2 pp 1 | etp 1 ep 2 edp 1 | optim_grads_params", and train.steps, from the
// run's job.toml; nothing when it cannot be read (a run started by an older muster).
void read_job(const store::run_paths& paths, std::int64_t world, run_status& s) {
  try {
    const auto loaded = load_job_config(paths.job_config(), {});
    s.steps_planned = loaded.config.train.steps;
    if (world <= 0) return;
    const auto l = plan::resolve_layout(
        loaded.config.parallel, plan::world_size{static_cast<int>(world), "the run"}, loaded.where);
    s.layout =
        fmt::format("tp {} cp {} dp {} pp {} | etp {} ep {} edp {} | {}", l.tp(), l.cp(), l.dp(),
                    l.pp(), l.etp(), l.ep(), l.edp(), loaded.config.parallel.sharding);
  } catch (const error&) {
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Whether the rank's recorded process is still there (one of another user's counts): not a
// zombie (a rank dead with its launcher waits there until init reaps it), and not a later
// process given its pid (it started after the rank was recorded running: after a reboot, say).
bool rank_process_alive(const store::rank_record& rank) {
  if (!rank.pid) return false;
  const auto pid = *rank.pid;
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  if (!read_proc_stat(pid)) return true;  // /proc hides it (hidepid): kill said it is there
  return process_started_by(pid, rank.updated_ms);
}

// Whether this host's launchers of the run have all ended: their lock is there and free
// (common/launcher_lock.hpp). No lock (an older run, ranks that are their own Slurm tasks, a
// host name that cannot name a file): not known, so no.
bool launchers_ended_here(const store::run_paths& paths) {
  try {
    const auto alive = store::launcher_alive(paths.launcher_lock(short_hostname()));
    return alive && !*alive;
  } catch (const error&) {
    return false;
  }
}

// The steps and error files of ranks that are their own Slurm tasks, which no launcher copied
// to the store, into `s`: as the store keeps them, one record a (rank, step), the newest (the
// files are appended to by every attempt), ordered by (step, rank); and the errors written
// since the latest attempt started (`attempt`), not empty (one still being written).
void add_rank_files(const store::run_paths& paths, const std::vector<store::rank_record>& ranks,
                    store::epoch_ms attempt, run_status& s) {
  std::map<std::pair<std::int64_t, std::int64_t>, store::step_record> newest;  // (step, rank)
  for (const auto& rank : ranks) {
    for (auto& step : read_step_file(paths.rank_steps_file(rank.rank))) {
      step.rank = rank.rank;
      newest[{step.step, rank.rank}] = step;  // a later line is a later attempt's
    }
    if (const auto e = read_worker_error(paths.rank_error_file(rank.rank));
        e && !e->message.empty() && e->time_ms >= attempt)
      s.errors.push_back({e->time_ms, rank.rank, e->step, e->phase, e->kind, e->message});
  }
  for (auto& [key, step] : newest) s.history.push_back(std::move(step));
  std::stable_sort(s.history.begin(), s.history.end(),
                   [](const store::step_record& a, const store::step_record& b) {
                     return std::tie(a.step, a.rank) < std::tie(b.step, b.rank);
                   });
}

bool has_node_files(const fs::path& dir) {
  try {
    return !store::run_paths(dir).node_dbs().empty();
  } catch (const error&) {
    return false;  // not a run directory (an unsafe name, or not listable)
  }
}

}  // namespace

run_status read_run_status(const fs::path& dir, store::epoch_ms now) {
  run_status s;
  s.dir = dir;
  const store::run_paths paths(dir);
  // this host's launchers all ended (their lock free): a rank whose pid is gone is gone now.
  // Asked before the store is read: a launcher records its end before it lets the lock go, so
  // a store read after a free lock is its last word
  const bool launchers_ended = launchers_ended_here(paths);
  store::run_reader reader(dir);
  s.run = reader.run();
  s.history = reader.steps();
  s.errors = reader.errors();
  const auto events = reader.events();
  // restarts that happened: the requeued starts (their SLURM_RESTART_COUNT), and the rounds of
  // launch.max_restarts in each start, once however many nodes said them (a requeue asked for
  // is no restart until the job starts again)
  std::set<std::pair<std::int64_t, std::int64_t>> rounds;  // (start, round)
  std::int64_t start = 0;
  const auto number_after = [](const std::string& text, std::string_view key) -> std::int64_t {
    const auto at = text.find(key);
    return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
  };
  for (const auto& e : events) {
    if (e.kind == "resumed")
      start = std::max(start, number_after(e.message, "SLURM_RESTART_COUNT="));
    if (e.kind == "restart" && e.message.starts_with("restart "))
      rounds.emplace(start, number_after(e.message, "restart "));
  }
  s.restarts = static_cast<int>(start + static_cast<std::int64_t>(rounds.size()));
  for (const auto& e : events) {
    if (e.kind == "restart" || e.kind == "resumed") s.attempt_starts.push_back(e.time_ms);
    if (e.kind == "first_failure" && !s.first_failure) s.first_failure = e;
    if (e.kind == "requeue_refused") s.requeue_refused = e;
    if (e.kind == "exec") s.one_task_per_rank = true;
  }
  // when the ranks last (re)started: a restart, a requeue's resume
  store::epoch_ms attempt = s.attempt_starts.empty() ? 0
                                                     : *std::max_element(s.attempt_starts.begin(),
                                                                         s.attempt_starts.end());
  const auto stored_ranks = reader.ranks();
  if (s.one_task_per_rank) add_rank_files(paths, stored_ranks, attempt, s);
  // Progress is the latest attempt's, once it has a step: an attempt without a checkpoint starts
  // again from step 0, below the steps the one before it reached.
  if (std::none_of(s.history.begin(), s.history.end(),
                   [&](const store::step_record& r) { return r.time_ms >= attempt; }))
    attempt = 0;
  const auto current = [&](const store::step_record& r) { return r.time_ms >= attempt; };
  // Each rank's newest step (history is ordered by step).
  std::map<std::int64_t, store::step_record> last;
  std::int64_t first = -1;  // the attempt's first step: where a rank with none of it is
  for (const auto& step : s.history)
    if (current(step)) {
      last[step.rank] = step;
      first = first < 0 ? step.step : std::min(first, step.step);
    }
  std::int64_t newest = -1, complete = -1;
  for (const auto& [rank, step] : last) {
    newest = std::max(newest, step.step);
    complete = complete < 0 ? step.step : std::min(complete, step.step);
  }
  s.steps_done = newest + 1;
  s.complete_steps = complete + 1;
  s.first_step = first + 1;
  read_job(paths, s.run ? s.run->world_size : static_cast<std::int64_t>(last.size()), s);
  // train.steps and the layout are muster-train's: a program of one's own says its steps in its
  // heartbeat, and lays out its ranks itself
  s.builtin_engine = ran_builtin_engine(events).value_or(true);
  if (!s.builtin_engine) {
    s.steps_planned = 0;
    s.layout.clear();
  }

  // The run at its newest complete step.
  double loss = 0, mfu = 0;
  int losses = 0, mfus = 0;
  std::vector<double> step_times;
  for (const auto& step : s.history) {
    step_times.push_back(step.step_time_s);
    if (step.step != complete || !current(step)) continue;
    s.tokens_per_s += step.step_time_s > 0 ? double(step.tokens) / step.step_time_s : 0;
    if (!std::isnan(step.loss)) loss += step.loss, ++losses;
    if (!std::isnan(step.mfu)) mfu += step.mfu, ++mfus;
  }
  if (losses > 0) s.loss = loss / losses;
  if (mfus > 0) s.mfu = mfu / mfus;

  const double stale_s = std::max(60.0, 5 * median(step_times));
  for (const auto& rank : stored_ranks) {
    rank_status r{rank, std::nullopt, age_of(paths.rank_heartbeat_file(rank.rank), now), false};
    if (auto it = last.find(rank.rank); it != last.end()) r.last = it->second;
    if (rank.state == store::rank_state::running) {
      const auto behind = newest - (r.last ? r.last->step : first - 1);
      r.laggard = (newest >= 0 && behind >= kBehindSteps) ||
                  (r.heartbeat_age_s && *r.heartbeat_age_s > stale_s);
    }
    s.ranks.push_back(std::move(r));
  }
  // the steps the program says it will run (its heartbeat's steps=) over the job's train.steps,
  // which only muster-train reads; a program that writes no steps file says its progress there
  // alone (step=)
  bool planned = false;
  for (auto& r : s.ranks)
    if (const auto beat = read_heartbeat(paths.rank_heartbeat_file(r.rank.rank))) {
      r.beat = beat->progress;
      if (!planned && beat->progress.steps) s.steps_planned = *beat->progress.steps;
      planned = true;
      if (s.history.empty() && beat->progress.step)
        s.steps_done = std::max(s.steps_done, *beat->progress.step);
    }
  const auto here = short_hostname();
  bool running = false;
  s.lost = s.run && s.run->state == store::run_state::running;
  // the run's end recorded (by another node's launcher) where this rank's launcher recorded none
  const bool run_ended = s.run && s.run->state != store::run_state::running;
  for (auto& r : s.ranks) {
    if (r.rank.state != store::rank_state::running) continue;
    running = true;
    // its pid on this host, and its heartbeat as stale as a laggard's: a pid alone misleads in
    // another PID namespace of the same host name, or while the launcher records a rank's end
    r.alive_here = r.rank.host == here && rank_process_alive(r.rank);
    const bool stale = !r.heartbeat_age_s || *r.heartbeat_age_s > stale_s;
    r.gone = (r.rank.host == here && r.rank.pid && !r.alive_here && (launchers_ended || stale)) ||
             // on another host: its launcher gone with its node while the others ended the run
             (run_ended && !r.alive_here && stale);
    s.lost = s.lost && r.gone;
  }
  // a rank whose process, or a wrapper script's child (each rank leads its process group), is
  // stopped
  std::vector<std::int64_t> here_groups;
  for (const auto& r : s.ranks)
    if (r.alive_here) here_groups.push_back(*r.rank.pid);
  const auto stopped = stopped_groups(here_groups);
  for (auto& r : s.ranks) r.stopped_here = r.alive_here && stopped.contains(*r.rank.pid);
  // ranks that were their own Slurm tasks end unrecorded: Slurm says the end (slurm_job_state)
  s.lost = s.lost && running && !s.one_task_per_rank;
  return s;
}

std::vector<run_entry> list_runs(const fs::path& runs_dir) {
  std::vector<run_entry> runs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
    if (!e.is_directory() || !has_node_files(e.path())) continue;
    try {
      const store::run_paths paths(e.path());
      const bool ended = launchers_ended_here(paths);  // before the store
      store::run_reader reader(e.path());
      auto run = reader.run();
      if (!run) continue;
      const auto ranks = reader.ranks();
      std::int64_t newest = -1;
      store::epoch_ms updated = run->updated_ms;
      for (const auto& step : reader.last_steps()) {
        newest = std::max(newest, step.step);
        updated = std::max(updated, step.time_ms);
      }
      std::int64_t done = newest + 1;
      if (newest < 0)  // a program that writes no steps file: its heartbeats' step=, as its view
        for (const auto& r : ranks)
          if (const auto beat = read_heartbeat(paths.rank_heartbeat_file(r.rank));
              beat && beat->progress.step)
            done = std::max(done, *beat->progress.step);
      // as read_run_status says it: recorded running, this host's launchers ended, and every
      // rank recorded running was on this host and is gone
      bool lost = run->state == store::run_state::running && ended;
      if (lost) {
        const auto here = short_hostname();
        bool any = false;
        for (const auto& r : ranks) {
          if (r.state != store::rank_state::running) continue;
          any = true;
          lost = lost && r.host == here && r.pid && !rank_process_alive(r);
        }
        lost = lost && any;
      }
      runs.push_back({e.path(), std::move(*run), done, lost, updated});
    } catch (const error&) {
      // a directory that cannot be read is left out of the list
    }
  }
  std::sort(runs.begin(), runs.end(), [](const run_entry& a, const run_entry& b) {
    return a.run.created_ms > b.run.created_ms;
  });
  return runs;
}

std::vector<fs::path> storeless_runs(const fs::path& runs_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec))
    if (e.is_directory() && !has_node_files(e.path()) && fs::exists(e.path() / "slurm.out", ec))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<fs::path> slurm_job_run(const std::string& job_id, const fs::path& runs_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
    const auto name = e.path().filename().string();
    if (e.is_directory() && name.size() > job_id.size() + 1 && name.ends_with("-" + job_id))
      return e.path();
  }
  return std::nullopt;
}

std::vector<fs::path> array_task_runs(const std::string& job_id, const fs::path& runs_dir) {
  std::vector<std::pair<std::uint64_t, fs::path>> tasks;
  if (job_id.empty() || job_id.size() > 12 ||
      job_id.find_first_not_of("0123456789") != std::string::npos)
    return {};
  const auto marker = "-" + job_id + "_";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
    const auto name = e.path().filename().string();
    const auto at = name.rfind(marker);
    if (at == std::string::npos || at == 0 || !e.is_directory()) continue;
    const auto task = name.substr(at + marker.size());
    if (task.empty() || task.size() > 12 ||
        task.find_first_not_of("0123456789") != std::string::npos)
      continue;
    tasks.emplace_back(std::stoull(task), e.path());
  }
  std::sort(tasks.begin(), tasks.end());
  std::vector<fs::path> out;
  for (auto& [task, dir] : tasks) out.push_back(std::move(dir));
  return out;
}

// The run directory whose slurm.out links to `slurm-<job_id>.out` (muster-sbatch's batch script
// links it so, by the job's own id: an array task's too), or none.
std::optional<fs::path> slurm_output_run(const std::string& job_id, const fs::path& runs_dir) {
  if (job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const auto target = fs::read_symlink(e.path() / "slurm.out", ec);
    if (!ec && target.filename() == "slurm-" + job_id + ".out") return e.path();
  }
  return std::nullopt;
}

// A run directory whose launchers stopped before any rank started (a failed rendezvous) has
// a job.toml and slurm.out, maybe logs, but no run store: say so, and what there is to read.
[[noreturn]] void throw_storeless(const std::string& what, const fs::path& dir) {
  std::vector<std::string> read;
  std::error_code ec;
  for (const auto& p : {dir / "slurm.out", dir / "logs"})
    if (fs::exists(p, ec)) read.push_back(p.string());
  MUSTER_THROW(errc::invalid_input,
               "{}: the run directory {} holds no run store (node-*.db): its launchers stopped "
               "before any rank started; {}",
               what, dir.string(),
               read.empty()
                   ? std::string("nothing there says why: read the job's Slurm output")
                   : fmt::format("muster diagnose {} reads {}", what, fmt::join(read, " and ")));
}

namespace {

// Whether `id` is the array task's own job id of `run`. Slurm gives the array's id to one of its
// tasks as its own: that id names the array, whose task runs the caller lists.
bool own_job_id(const store::run_record& run, const std::string& id) {
  return run.slurm_task_job_id == id &&
         !(run.slurm_job_id && run.slurm_job_id->starts_with(id + "_"));
}

}  // namespace

fs::path find_run(const std::string& what, const fs::path& runs_dir, bool storeless) {
  std::error_code ec;
  const auto without_store = [&](const fs::path& dir) {
    if (!storeless) throw_storeless(what, dir);
    return dir;
  };
  if (fs::is_directory(what, ec)) {
    if (has_node_files(what)) return fs::absolute(what);
    if (what.find('/') != std::string::npos) return without_store(fs::absolute(what));
  }
  if (what.find('/') == std::string::npos && !what.empty()) {
    if (fs::is_directory(runs_dir / what, ec)) {
      if (has_node_files(runs_dir / what)) return runs_dir / what;
      return without_store(runs_dir / what);
    }
    const auto runs = list_runs(runs_dir);
    std::vector<fs::path> matches;
    for (const auto& r : runs)
      if (r.run.run_id.rfind(what, 0) == 0 || r.run.slurm_job_id == what || own_job_id(r.run, what))
        matches.push_back(r.dir);
    // several: the newest, as `muster diagnose tiny-moe` means the last run of tiny-moe
    if (matches.size() > 1)
      fmt::print(stderr,
                 "muster: {} runs in {} match {}: the newest, {} (give more of the run id "
                 "for another)\n",
                 matches.size(), runs_dir.string(), what, matches.front().filename().string());
    if (!matches.empty()) return matches.front();
  }
  // Under Slurm a run directory is <job.name>-<job id>: one without a store is still found
  if (const auto dir = slurm_job_run(what, runs_dir)) return without_store(*dir);
  // an array job: its tasks' runs are <job.name>-<job id>_<task id>
  const auto tasks = array_task_runs(what, runs_dir);
  if (tasks.size() == 1)
    return has_node_files(tasks.front()) ? tasks.front() : without_store(tasks.front());
  if (!tasks.empty()) {
    std::vector<std::string> names;
    for (const auto& t : tasks) names.push_back(t.filename().string());
    const auto first = names.front();
    MUSTER_THROW(errc::invalid_input,
                 "{}: Slurm array job {} has {} task runs in {}: {}; give one as <array job "
                 "id>_<task id> ({}) or by its directory",
                 what, what, tasks.size(), runs_dir.string(), fmt::join(names, ", "),
                 first.substr(first.rfind('-') + 1));
  }
  // an array task by its own job id, before its launchers wrote a store
  if (const auto dir = slurm_output_run(what, runs_dir))
    return has_node_files(*dir) ? *dir : without_store(*dir);
  MUSTER_THROW(errc::invalid_input,
               "{}: no run directory, run id or Slurm job id of that name in {}; `muster "
               "status --runs-dir DIR` lists the runs of DIR (launch.runs_dir)",
               what, runs_dir.string());
}

}  // namespace muster::launcher::status

// `muster status` for people: see status_output.hpp.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "launcher/run_recorder.hpp"
#include "launcher/status/status_output.hpp"

namespace muster::launcher::status {
namespace {

template <class... Args>
void put(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

double seconds_since(store::epoch_ms when, store::epoch_ms now) {
  return std::max(0.0, double(now - when) / 1000.0);
}

std::string number(double v, const char* format) {
  return std::isnan(v) ? "-" : fmt::format(fmt::runtime(format), v);
}

// What a Slurm job state says of a run whose end the store recorded.
std::string slurm_state_note(std::string_view state, bool builtin_engine) {
  if (state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD" ||
      state == "REQUEUE_FED")
    return std::string(": requeued, it starts again in this run directory") +
           (builtin_engine ? " (the built-in engine goes on from its newest checkpoint)"
                           : " (the program goes on from what it saved)");
  if (state == "RUNNING") return ": started again (a requeue), in this run directory";
  if (state == "TIMEOUT") return ": it reached its time limit";
  if (state == "NODE_FAIL") return ": a node of it failed";
  if (state == "OUT_OF_MEMORY") return ": a task ran out of memory";
  if (state == "PREEMPTED") return ": preempted";
  return "";
}

}  // namespace

std::string age_text(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.0f} min", s / 60);
  if (s < 172800) return fmt::format("{:.0f} h", s / 3600);
  return fmt::format("{:.0f} d", s / 86400);
}

std::string status_text(const run_status& s, store::epoch_ms now) {
  std::string out;
  if (!s.run) {
    put(out, "run       {}: no launcher has recorded it yet\n", s.dir.string());
    return out;
  }
  const auto& r = *s.run;
  // the run's record changes with its state; its steps say it goes on
  auto updated = r.updated_ms;
  for (const auto& step : s.history) updated = std::max(updated, step.time_ms);
  put(out, "run       {}  ({}, updated {} ago)\n", r.run_id,
      s.lost                  ? std::string("lost")
      : s.slurm_ended.empty() ? std::string(store::to_string(r.state))
                              : "ended: Slurm says " + s.slurm_ended,
      age_text(seconds_since(updated, now)));
  if (s.one_task_per_rank)
    put(out,
        "tasks     one Slurm task per rank: Slurm supervises them and keeps their ends ({}), "
        "their output is the job's (srun's); the store has their starts, the steps and errors "
        "they wrote\n",
        r.slurm_job_id ? "sacct -j " + *r.slurm_job_id : "sacct");
  if (!s.slurm_now.empty())
    put(out, "slurm     job {} is {}{}\n", r.slurm_job_id.value_or("?"), s.slurm_now,
        slurm_state_note(s.slurm_now, s.builtin_engine));
  if (s.requeue_refused) put(out, "requeue   {}\n", s.requeue_refused->message);
  if (s.lost)
    put(out,
        "lost      the store says running, but {}: the launcher ended without recording it "
        "(SIGKILL, killed with its job, or the node went down), and nothing will; muster "
        "diagnose {} reads what it left\n",
        s.lost_why.empty() ? "its launcher and ranks are gone" : s.lost_why, r.run_id);
  put(out, "job       {}: {} rank(s) on {} node(s){}; started {} ago\n", r.name, r.world_size,
      r.num_nodes, r.slurm_job_id ? ", Slurm job " + *r.slurm_job_id : "",
      age_text(seconds_since(r.created_ms, now)));
  if (!s.layout.empty()) put(out, "layout    {}\n", s.layout);
  put(out, "progress  step {}{}", s.steps_done,
      s.steps_planned > 0 ? fmt::format(" of {}", s.steps_planned) : "");
  if (s.loss) put(out, " | loss {:.4f}", *s.loss);
  if (s.tokens_per_s > 0) put(out, " | {:.0f} tok/s", s.tokens_per_s);
  if (s.mfu) put(out, " | MFU {:.1f}%", 100 * *s.mfu);
  // those are of the newest step every rank finished, which may be the one before
  if ((s.loss || s.tokens_per_s > 0) && s.complete_steps > 0 && s.complete_steps != s.steps_done)
    put(out, " (at step {}, the newest every rank finished)", s.complete_steps);
  if (s.first_step > 1)
    put(out, "\n          resumed: {} from step {} on", s.restarts > 0 ? "this start" : "this run",
        s.first_step);
  put(out, "\nrestarts  {}\n", s.restarts);
  put(out, "\n{:>5}  {:<16} {:<10} {:>7} {:>10} {:>9} {:>10}\n", "rank", "host", "state", "step",
      "loss", "tok/s", "heartbeat");
  for (const auto& rank : s.ranks) {
    const auto& last = rank.last;
    std::string exit;
    if (rank.rank.signal)
      exit = fmt::format("signal {}", *rank.rank.signal);
    else if (rank.rank.exit_code && *rank.rank.exit_code != 0)
      exit = fmt::format("exit {}", *rank.rank.exit_code);
    // a run stopped by a signal (scancel, the pre-timeout USR1): its ranks ended on that stop;
    // but one the warning itself ended had no handler for it, and Slurm's SIGKILL at the time
    // limit is no stop asked for
    const auto sig = rank.rank.signal.value_or(0);
    if (!exit.empty() && s.run->state == store::run_state::cancelled &&
        rank.rank.state == store::rank_state::killed)
      exit += sig == SIGUSR1 || sig == SIGUSR2             ? " (no handler for it: saved nothing)"
              : sig == SIGKILL && s.slurm_now == "TIMEOUT" ? " (killed at the time limit)"
                                                           : " (stopped as asked)";
    std::string row =
        fmt::format("{:>5}  {:<16} {:<10} {:>7} {:>10} {:>9} {:>10}  {}{}", rank.rank.rank,
                    rank.rank.host, store::to_string(rank.rank.state),
                    last             ? std::to_string(last->step + 1)
                    : rank.beat.step ? std::to_string(*rank.beat.step)
                                     : "-",
                    last             ? number(last->loss, "{:.4f}")
                    : rank.beat.loss ? number(*rank.beat.loss, "{:.4f}")
                                     : "-",
                    last && last->step_time_s > 0
                        ? fmt::format("{:.0f}", double(last->tokens) / last->step_time_s)
                    : rank.beat.tokens_per_s ? fmt::format("{:.0f}", *rank.beat.tokens_per_s)
                                             : "-",
                    rank.heartbeat_age_s ? age_text(*rank.heartbeat_age_s) + " ago" : "-",
                    rank.gone           ? "<- process gone "
                    : rank.stopped_here ? "<- process stopped (SIGSTOP or a debugger) "
                    : rank.laggard      ? "<- behind "
                                        : "",
                    exit);
    out += row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
  }
  if (s.first_failure) {
    // the rank's last output (every line it printed last, joined) ends the message: its end,
    // where the error is, on a line of its own
    const auto& message = s.first_failure->message;
    put(out, "\nfirst failure: {}\n", message.substr(0, message.find(kLastOutput)));
    if (const auto output = last_output_tail(message)) put(out, "  last output: {}\n", *output);
  }
  for (const auto& e : s.errors) {
    put(out, "error     rank {}{}{}{}: {}\n", e.rank,
        e.step ? fmt::format(", step {}", *e.step + 1) : "",
        e.phase.empty() ? "" : ", in " + e.phase, e.kind.empty() ? "" : " (" + e.kind + ")",
        e.message.substr(0, 400));
  }
  return out;
}

std::string job_text(const slurm_job& j, const std::filesystem::path& runs_dir) {
  std::string out;
  put(out, "Slurm job {} ({}) is {}{}{}: no run of it in {} yet\n", j.id, j.name, j.state,
      j.where.empty() ? "" : " ", j.where, runs_dir.string());
  // muster-sbatch names the job after job.name; a script of one's own may name it otherwise
  const auto name = j.name.empty() ? "<job.name>" : j.name;
  // a pending array's tasks, "7_[0-2%1]": each task gets a run directory of its own
  if (const auto tasks = j.id.find("_["); tasks != std::string::npos) {
    const auto base = j.id.substr(0, tasks);
    auto range = j.id.substr(tasks + 2, j.id.find_first_of("%]", tasks) - tasks - 2);
    put(out,
        "each of its array tasks ({}) gets its own run directory, {}/{}-{}_<task id> "
        "(<job.name>-<array job id>_<task id>), when its muster launch starts (a job that runs no "
        "muster launch has none); squeue -j {} says more\n",
        range, runs_dir.string(), name, base, base);
    return out;
  }
  put(out,
      "its run directory, {}/{}-{} (<job.name>-<job id>), appears when its muster launch starts "
      "(a job that runs no muster launch has none); squeue -j {} says more\n",
      runs_dir.string(), name, j.id, j.id);
  return out;
}

// The run that records Slurm job `id` ("" when none does).
std::string run_of_job(const std::vector<run_entry>& runs, const std::string& id) {
  for (const auto& e : runs)
    if (e.run.slurm_job_id == id) return e.run.run_id;
  return "";
}

std::string runs_text(const std::vector<run_entry>& runs, store::epoch_ms now,
                      const std::optional<slurm_job_list>& slurm,
                      const std::vector<std::filesystem::path>& storeless,
                      const std::filesystem::path& runs_dir) {
  std::string out;
  if (runs.empty()) {
    out = runs_dir.empty() ? "no runs\n"
                           : fmt::format(
                                 "no runs in {} (runs elsewhere: --runs-dir DIR or "
                                 "MUSTER_RUNS_DIR, as their launch.runs_dir)\n",
                                 runs_dir.string());
  } else {
    put(out, "{:<48} {:<10} {:>6} {:>6} {:>10}\n", "run", "state", "ranks", "steps", "updated");
    for (const auto& e : runs)
      put(out, "{:<48} {:<10} {:>6} {:>6} {:>10}\n", e.run.run_id,
          e.lost ? "lost" : store::to_string(e.run.state), e.run.world_size, e.steps_done,
          age_text(seconds_since(e.updated_ms, now)) + " ago");
  }
  for (const auto& dir : storeless) {
    // <job.name>-<job id>: a job squeue still has is starting (its launchers are meeting)
    const auto name = dir.filename().string();
    const auto id = name.substr(name.rfind('-') + 1);
    const auto job = slurm ? find_job(*slurm, id) : nullptr;
    if (job)
      put(out, "{:<48} no run store yet: Slurm job {} is {}, its launchers are starting\n", name,
          id, job->state);
    else
      put(out,
          "{:<48} no run store: its launchers stopped before any rank started; muster "
          "diagnose {} reads its slurm.out\n",
          name, name);
  }
  if (!slurm) return out;
  if (!slurm->error.empty()) {
    put(out, "\nSlurm: squeue --me failed: {}\n", slurm->error);
    return out;
  }
  if (slurm->jobs.empty()) {
    out += "\nSlurm: no jobs of yours (squeue --me)\n";
    return out;
  }
  put(out, "\nSlurm jobs of yours (squeue --me):\n{:<12} {:<11} {:>11} {:>5}  {:<20} {:<20} {}\n",
      "job", "state", "time", "nodes", "nodelist(reason)", "name", "run");
  for (const auto& j : slurm->jobs)
    put(out, "{:<12} {:<11} {:>11} {:>5}  {:<20} {:<20} {}\n", j.id, j.state, j.elapsed, j.nodes,
        j.where, j.name, run_of_job(runs, j.id));
  return out;
}

}  // namespace muster::launcher::status

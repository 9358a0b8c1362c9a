// `muster status [RUN] [--json] [--watch[=SECONDS]] [--runs-dir DIR]`: the runs of a runs
// directory, or one run (a run id or the start of one, a run directory, or a Slurm job id): its
// state, layout, progress, each rank's last step and heartbeat (laggards marked), restarts, the
// first failure and the ranks' errors. Reads the run store read-only, while the run goes on or
// after. A Slurm job of the user's with no run yet (pending) gets what squeue says of it; one
// squeue no longer has, why it has none. An array job's id lists its tasks' runs.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/job_config.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/status/slurm_job_state.hpp"
#include "launcher/status/status_output.hpp"

namespace muster::cli {
namespace {

struct status_options {
  std::string run;
  std::string runs_dir = launch_section{}.runs_dir;
  bool json = false;
  std::string watch_given;  // --watch's seconds as written ("2" for a bare --watch)
  double watch = 0;         // seconds between refreshes; 0 = once
};

// --watch's seconds: a number over 0 (a fraction is fine), else errc::invalid_input.
double watch_seconds(const std::string& given) {
  if (given.empty()) return 0;
  double seconds = 0;
  std::size_t used = 0;
  try {
    seconds = std::stod(given, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MUSTER_CHECK(used == given.size() && seconds > 0 && seconds <= 86400, errc::invalid_input,
               "--watch={}: not a number of seconds; use --watch (every 2 s) or --watch=SECONDS, "
               "e.g. --watch=0.5 or --watch=10",
               given);
  return seconds;
}

bool ended(const launcher::status::run_status& s) {
  return s.lost || !s.slurm_ended.empty() ||
         (s.run && s.run->state != store::run_state::running &&
          s.run->state != store::run_state::created);
}

namespace st = launcher::status;

// The runs of array job `id`'s tasks (st::array_task_runs), as the list of runs shows them, with
// what squeue says of the array's tasks.
int show_array(const status_options& o, const std::vector<std::filesystem::path>& tasks) {
  const auto of_array = [&](const std::filesystem::path& dir) {
    return std::find(tasks.begin(), tasks.end(), dir) != tasks.end();
  };
  auto runs = st::list_runs(o.runs_dir);
  std::erase_if(runs, [&](const st::run_entry& r) { return !of_array(r.dir); });
  auto storeless = st::storeless_runs(o.runs_dir);
  std::erase_if(storeless, [&](const std::filesystem::path& dir) { return !of_array(dir); });
  auto slurm = st::user_slurm_jobs(std::chrono::seconds(10));
  if (slurm)
    std::erase_if(slurm->jobs,
                  [&](const st::slurm_job& j) { return !j.id.starts_with(o.run + "_"); });
  if (o.json) {
    fmt::print("{}", st::runs_json(runs, store::now_ms(), slurm, storeless));
    return kExitOk;
  }
  fmt::print("Slurm array job {}: {} task run{} in {} (muster status {}_<task id> shows one)\n",
             o.run, tasks.size(), tasks.size() == 1 ? "" : "s", o.runs_dir, o.run);
  fmt::print("{}", st::runs_text(runs, store::now_ms(), slurm, storeless));
  return kExitOk;
}

// A Slurm job id (or array task id) with no run: what squeue says of it, else why there is none
// (throws errc::invalid_input). False when squeue cannot say (no Slurm here, or it failed).
bool show_job(const status_options& o) {
  const auto job = st::job_without_run(o.run, o.runs_dir);
  if (!job) return false;
  fmt::print("{}", o.json ? st::job_json(*job) : st::job_text(*job, o.runs_dir));
  return true;
}

int show(const status_options& o) {
  if (o.run.empty()) {
    const auto runs = st::list_runs(o.runs_dir);
    const auto slurm = st::user_slurm_jobs(std::chrono::seconds(10));
    const auto storeless = st::storeless_runs(o.runs_dir);
    fmt::print("{}", o.json ? st::runs_json(runs, store::now_ms(), slurm, storeless)
                            : st::runs_text(runs, store::now_ms(), slurm, storeless, o.runs_dir));
    return kExitOk;
  }
  // an array job's id: its task runs with what squeue says of its other tasks (pending ones),
  // also while only one task has a run
  if (o.run.find_first_not_of("0123456789") == std::string::npos)
    if (const auto tasks = st::array_task_runs(o.run, o.runs_dir); !tasks.empty())
      return show_array(o, tasks);
  std::filesystem::path dir;
  try {
    dir = st::find_run(o.run, o.runs_dir);
  } catch (const error& e) {
    // a Slurm job id with no run yet (pending, or before its launch starts): what squeue says
    if (e.category() != errc::invalid_input ||
        o.run.find_first_not_of("0123456789_") != std::string::npos)
      throw;
    if (show_job(o)) return kExitOk;
    throw;
  }
  std::optional<st::slurm_job_state> slurm;  // asked again at most every 30 s under --watch
  store::epoch_ms asked = 0;
  for (;;) {
    const auto now = store::now_ms();
    auto s = st::read_run_status(dir, now);
    if (st::asks_slurm(s)) {
      if (!slurm || now - asked > 30000) {
        slurm =
            st::ask_job_state(*s.run->slurm_job_id, s.run->slurm_cluster, std::chrono::seconds(5));
        asked = now;
      }
      st::apply_job_state(s, *slurm);
    } else if (s.run && s.run->slurm_job_id && ended(s)) {
      // what Slurm did to the job, where the store says only that the run ended
      const auto said =
          st::ask_job_state(*s.run->slurm_job_id, s.run->slurm_cluster, std::chrono::seconds(5));
      if (said.is != st::slurm_job_state::kind::unknown) s.slurm_now = said.state;
    }
    // clear the terminal; a file or a pipe gets one status after another
    if (o.watch > 0 && !o.json && ::isatty(STDOUT_FILENO) == 1) fmt::print("\x1b[H\x1b[2J");
    fmt::print("{}", o.json ? st::status_json(s, now) : st::status_text(s, now));
    if (o.watch <= 0 || ended(s)) return kExitOk;
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.watch));
  }
}

}  // namespace

void add_status_verbs(CLI::App& app, verb_action& run) {
  auto o = std::make_shared<status_options>();
  auto* sub = app.add_subcommand(
      "status",
      "the runs of the runs directory (and under Slurm your jobs, squeue --me), or one run: "
      "state, layout, progress, each rank's last step and heartbeat (laggards marked), "
      "restarts, the first failure");
  sub->add_option("run", o->run, "a run id (or its start), a run directory or a Slurm job id");
  sub->add_option("--runs-dir", o->runs_dir, "where the runs are (launch.runs_dir)")
      ->capture_default_str()
      ->envname("MUSTER_RUNS_DIR");
  sub->add_flag("--json", o->json, "everything as JSON, with the per-step history of each rank");
  // a flag, so `--watch RUN` never takes the run for its seconds
  sub->add_flag("--watch{2}", o->watch_given,
                "refresh every 2 s (--watch=SECONDS: every SECONDS) until the run ends");
  sub->callback([o, &run] {
    run = [o] {
      o->watch = watch_seconds(o->watch_given);
      return show(*o);
    };
  });
  sub->footer("example: muster status --runs-dir ./muster-runs tiny-moe");
}

}  // namespace muster::cli

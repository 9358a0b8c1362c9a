// What `muster status` knows of a run, read from its directory alone: the run store's node
// files (read-only, merged; common/run_reader.hpp), the ranks' heartbeat files and the resolved
// job.toml. Works while the run goes on (the writers keep writing) and after it ended.
// Not here: printing it (status_text.cpp, status_json.cpp), finding a run (find_run below).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/heartbeat_line.hpp"
#include "common/run_store_records.hpp"

namespace muster::launcher::status {

struct rank_status {
  store::rank_record rank;
  std::optional<store::step_record> last;  // its newest step
  std::optional<double> heartbeat_age_s;   // since its heartbeat file last changed
  bool laggard = false;                    // running, and behind the others (see read_run_status)
  bool gone = false;  // recorded running on this host, no process has its pid any more, and
                      // its heartbeat is stale (as a laggard's) or missing
  bool alive_here = false;  // recorded running on this host, and a process has its pid
  bool stopped_here = false;  // ... and that process is stopped (SIGSTOP, a debugger: state T)
  // what its heartbeat says (a program that writes no steps file says its step and loss there)
  heartbeat_progress beat{};
};

struct run_status {
  std::filesystem::path dir;
  std::optional<store::run_record> run;  // none: no launcher has written the store yet
  std::string layout;                    // "tp 1 cp 1 dp 2 pp 1 | etp 1 ep 2 edp 1 | sharding ..."
  std::int64_t steps_planned = 0;  // the program's heartbeat steps=, else train.steps of the job
  bool builtin_engine = true;      // its ranks ran muster-train (or a run too old to say)
                                   // where the ranks ran muster-train (0: not known)
  std::int64_t steps_done = 0;     // the highest step any rank finished, counted from 1, in the
                                   // latest attempt (a restart, a requeue) once it has one
  // At the newest step every rank that reports steps has finished (complete_steps, from 1; it
  // may be behind steps_done while the ranks are between steps):
  std::int64_t complete_steps = 0;
  // The latest attempt's first step, counted from 1: above 1 where it resumed from a checkpoint
  // (a run started with one, a requeue); 0: no step yet.
  std::int64_t first_step = 0;
  std::optional<double> loss;  // mean over the ranks (each rank's loss is the global one)
  double tokens_per_s = 0;     // summed over the ranks
  std::optional<double> mfu;   // mean over the ranks that report it
  std::vector<rank_status> ranks;
  int restarts = 0;  // restarts that happened: of the ranks (launch.max_restarts, once for
                     // all nodes) and the starts of a requeued job
  std::optional<store::event_record> first_failure;
  // node 0's refusal to requeue the job (its requeue would train the same steps again)
  std::optional<store::event_record> requeue_refused;
  std::vector<store::error_record> errors;
  std::vector<store::step_record> history;  // every step of every rank, by (step, rank)
  // when each attempt after the first started (a restart, a requeue's resume), in order: the
  // history holds every attempt's steps, each (rank, step) the newest attempt's
  std::vector<store::epoch_ms> attempt_starts;
  // Recorded running, and every rank recorded running is gone: the launcher ended without
  // recording it (SIGKILL, or the node went down), and nothing will record the end.
  bool lost = false;
  // Slurm started each rank as its own task (`exec` events): it supervises them, and no launcher
  // records their ends. Their steps and errors are read from the files the ranks leave
  // (logs/rank-N.steps, logs/rank-N.error), which no launcher copies to the store.
  bool one_task_per_rank = false;
  // of such a run, recorded running: Slurm's state of its job once it has ended ("COMPLETED",
  // "FAILED", "no longer known to Slurm"; slurm_job_state.hpp), the end the store cannot say
  std::string slurm_ended;
  std::string lost_why;  // who says so, where it is not this host's pids: "Slurm says job 15
                         // is over (FAILED)" (slurm_job_state.hpp)
  // of a run whose end is recorded: Slurm's state of its job now ("TIMEOUT", "NODE_FAIL",
  // "PENDING" after a requeue), which the store's cancelled or failed cannot tell; "": not asked
  std::string slurm_now;
};

// Reads run `dir` as of `now`. A running rank is a laggard when its newest step is 2 or more
// behind the newest of any rank, or when its heartbeat is older than the larger of 60 s and
// 5 step times (the median step time). A rank recorded running on this host (short hostname)
// whose pid no process has and whose heartbeat is that stale (or missing) is gone; a run whose
// running ranks are all gone is lost. Throws
// errc::store / errc::io when the store cannot be read.
run_status read_run_status(const std::filesystem::path& dir, store::epoch_ms now);

// One run of a runs directory, for the list.
struct run_entry {
  std::filesystem::path dir;
  store::run_record run;
  std::int64_t steps_done = 0;
  // recorded running, this host's launchers' lock free (they died unrecorded), and every rank
  // recorded running was on this host and is gone
  bool lost = false;
  // the newest of the run record's and its newest steps' times: a running run's record changes
  // only with its state, its steps as it goes on (as the run's own view says it)
  store::epoch_ms updated_ms = 0;
};

// The runs under `runs_dir` (directories holding node files), newest first. A directory that
// cannot be read is skipped.
std::vector<run_entry> list_runs(const std::filesystem::path& runs_dir);

// The run directories under `runs_dir` without a run store (node-*.db) but with Slurm's output
// (slurm.out): jobs whose launchers stopped before any rank started. By name.
std::vector<std::filesystem::path> storeless_runs(const std::filesystem::path& runs_dir);

// The run directory under `runs_dir` of Slurm job `job_id`, <job.name>-<job_id>, with a run
// store or without; nothing when there is none.
std::optional<std::filesystem::path> slurm_job_run(const std::string& job_id,
                                                   const std::filesystem::path& runs_dir);

// The run directories under `runs_dir` of Slurm array job `job_id`'s tasks,
// <job.name>-<job_id>_<task id>, with a run store or without, by task id. Empty unless `job_id`
// is a job id alone (digits).
std::vector<std::filesystem::path> array_task_runs(const std::string& job_id,
                                                   const std::filesystem::path& runs_dir);

// The run directory `what` names: a directory path, a run id under `runs_dir` (or the start of
// one: where several runs start with it, the newest, said on stderr), a Slurm job id that a run
// records (the newest), or an array job id whose
// one task has a run. Throws errc::invalid_input naming what was looked for, where, and what
// there is (the task runs of an array job with several, to pick one); for a run directory
// without a run store (its launchers stopped before any rank started) too, saying what to read,
// unless `storeless` (diagnose reads its slurm.out and logs), which returns it.
std::filesystem::path find_run(const std::string& what, const std::filesystem::path& runs_dir,
                               bool storeless = false);

}  // namespace muster::launcher::status

// The user's Slurm jobs for `muster status` without a run: what `squeue --me` says, run through
// an argv (common/run_program.hpp), with each job's run when a run directory records it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::launcher::status {

struct slurm_job {
  std::string id;       // "4242", "4242_3" for an array task
  std::string state;    // RUNNING, PENDING, ...
  std::string elapsed;  // squeue's %M: "1-02:03:04", "5:06"
  std::string nodes;    // the node count
  std::string where;    // the nodelist when running, "(Reason)" when pending
  std::string name;
};

struct slurm_job_list {
  std::vector<slurm_job> jobs;
  std::string error;  // squeue's own words when it failed (no controller, a bad config)
};

// squeue's output in the format user_slurm_jobs asks for ("%i|%T|%M|%D|%R|%j" a line; the name
// last, since it may hold '|'). Lines of another shape are skipped.
slurm_job_list parse_squeue(std::string_view output);

// The job `id` names in `list`: its own id, or the array task or array job it is ("4242_3" in a
// pending "4242_[0-7]"; "4242" for any task of that array); null when none.
const slurm_job* find_job(const slurm_job_list& list, std::string_view id);

// This user's jobs, or std::nullopt when this host has no Slurm: no squeue in PATH, or squeue
// failing on a host with neither SLURM_CONF, SLURM_JOB_ID nor /etc/slurm/slurm.conf (a laptop
// with the client installed; configless Slurm answers without a slurm.conf). Waits at most
// `timeout` for squeue.
std::optional<slurm_job_list> user_slurm_jobs(std::chrono::milliseconds timeout);

// A Slurm job id (or array task id) `id` that names no run under `runs_dir`: squeue's job
// (pending, or before its launchers start), for the caller to print; std::nullopt when squeue
// cannot say (no Slurm here, or it failed) or a run directory of it without a store is there
// (find_run's word stands). Throws errc::invalid_input saying why there is no run when squeue
// no longer has the job (never started: cancelled while pending, a prolog that failed).
std::optional<slurm_job> job_without_run(const std::string& id,
                                         const std::filesystem::path& runs_dir);

}  // namespace muster::launcher::status

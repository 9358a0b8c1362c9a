// Who may see and change a job's data on this node: root, and the uid that owns the job. The
// owner is the one Slurm reports (`squeue -h --states=all -j <id> -o %U`, run with an argv,
// never a shell), remembered in the node store and asked again when another uid claims the job
// (Slurm reuses ids); a job id Slurm cannot have written (a local `muster run`), or any id on a
// node without Slurm, belongs to the uid that first recorded it. Public node status needs none
// of this. Called on the store thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/node_store.hpp"

namespace muster::daemon {

// How musterd asks Slurm (the [slurm] section of musterd.toml).
struct slurm_lookup {
  std::string squeue = "squeue";  // empty: no Slurm here
  std::string conf;               // SLURM_CONF for squeue; empty: Slurm's default
  std::chrono::milliseconds timeout{3000};
};

// The uid squeue printed (its first line, "1000"; an array job prints one line per task), or
// nullopt when it is not one.
std::optional<uid_t> parse_squeue_owner(std::string_view output);

// Whether `job_id` is written as Slurm writes job ids: "123", "123_4" (array task), "123+1"
// (heterogeneous component).
bool looks_like_slurm_job(std::string_view job_id);

// What a request may do with a job.
enum class job_use {
  claim,  // may make the asker the owner of a job nobody recorded (a step's start, env, preflight)
  read,   // only a job already known (a job query, a step's end)
};

struct access_result {
  bool allowed = false;
  std::string code;     // when not allowed: denied, not_found or unavailable (protocol.hpp)
  std::string message;  // when not allowed: one line naming the job, the uids and why
  std::optional<job_owner> owner;  // the job's owner, where it is known
};

// Whether Slurm still has job `job_id` allocated (running, completing, suspended...): false for
// a job that ended or that it does not know, nullopt when squeue cannot say (or there is no
// Slurm). Blocks for squeue, at most lookup.timeout.
std::optional<bool> slurm_job_allocated(const slurm_lookup& lookup, const std::string& job_id);

// The same for several jobs in one squeue (one lookup.timeout in all, where slurmctld is slow):
// each job Slurm could be asked about, with its answer; none where squeue cannot say.
std::map<std::string, bool> slurm_jobs_allocated(const slurm_lookup& lookup,
                                                 const std::vector<std::string>& job_ids);

// Decides whether `uid` may `use` job `job_id`, recording a newly learnt owner in `store`.
// Blocks for squeue (at most lookup.timeout); a job Slurm does not know is remembered for a
// minute, so a stream of made-up ids costs one squeue each per minute. Throws errc::store.
access_result authorize_job(node_store& store, const slurm_lookup& lookup,
                            const std::string& job_id, uid_t uid, job_use use);

}  // namespace muster::daemon

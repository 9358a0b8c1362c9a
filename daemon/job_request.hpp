// The `job` request: what this node recorded of one job: its owner, its steps, the environment
// decisions sent to them and their preflights. Job-scoped: only root or the job's owner.
//
//   {"version": 1, "request": "job", "job": {"id": "4242"}}
//   reply: {"version": 1, "ok": true,
//           "job": {"id": "4242", "uid": 1000, "owner_from": "slurm"},
//           "steps": [{"step", "uid", "pid", "run_dir", "num_ranks", "state", "started_ms",
//                      "ended_ms", "exit_code", "message"}],
//           "decisions": [{"time_ms", "step", "rule", "action", "name", "value", "reason"}],
//           "preflights": [{"time_ms", "step", "passed", "checks": [...]}]}
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/router.hpp"

namespace muster::daemon {

// A reply's fields from a JSON object: its members without the braces.
std::string members_of(const nlohmann::json& object);

// A recorded step as JSON: all of it for the job's owner (the job request), or only what is
// public (status: job, step, uid, state, times, exit code; not its directory, pid or message).
nlohmann::json step_json(const step_entry& s, bool full);

// Parses the request (throws bad_request) and returns the work that answers it.
request_work job_work(const nlohmann::json& request, const slurm_lookup& slurm, uid_t uid);

}  // namespace muster::daemon

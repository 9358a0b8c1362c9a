// The `record` request: a launcher tells its node that a job step started or ended, so the node
// keeps its own history (node_store.hpp). Job-scoped: only root or the job's owner
// (job_access.hpp) may record; a step's start may make its asker the owner of a job nobody
// recorded and Slurm does not know.
//
//   {"version": 1, "request": "record", "event": "start",
//    "job": {"id": "4242", "step": "0"}, "run_dir": "/runs/r1", "num_ranks": 8}
//   {"version": 1, "request": "record", "event": "end", "job": {"id": "4242", "step": "0"},
//    "state": "failed", "exit_code": 3, "message": "rank 5 failed first (exit 3)"}
//   reply: {"version": 1, "ok": true, "recorded": "start"}
//   {"version": 1, "request": "record", "event": "job_end", "job": {"id": "4242"}}
//   reply: {"version": 1, "ok": true, "recorded": "job_end", "closed": 1}
// state is one of completed, failed, cancelled. The step's pid is the asker's (SO_PEERCRED).
// job_end (Slurm's epilog, `muster node job-end`): the job is over on this node; steps that
// never recorded their end (a launcher killed with SIGKILL, the node's job ended under it) are
// closed as cancelled, saying so; "closed" counts them.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/router.hpp"

namespace muster::daemon {

// Parses the request (throws bad_request) and returns the work that records it.
request_work record_work(const nlohmann::json& request, const slurm_lookup& slurm, const peer& who);

}  // namespace muster::daemon

// The `preflight` request: is the node fit for this job step now (preflight.hpp)? Job-scoped
// (job_access.hpp); the result is recorded in the node store, and each failed check also as a
// health observation.
//
//   {"version": 1, "request": "preflight", "job": {"id": "4242", "step": "0"},
//    "gpus": [0, 1, 2, 3], "num_gpus": 4, "run_dir": "/runs/r1"}
// "gpus" are the indices given to the step (SLURM_JOB_GPUS), "num_gpus" their number when the
// indices are not known; both optional, as is run_dir.
//   reply: {"version": 1, "ok": true, "passed": false,
//           "checks": [{"check": "gpu_leftovers", "status": "fail", "detail": "..."}, ...],
//           "gpus": {...the inventory, as status reports it}}
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/router.hpp"

namespace muster::daemon {

// Parses the request (throws bad_request) and returns the work that runs and records it.
request_work preflight_work(const nlohmann::json& request, const node_context& node, uid_t uid);

}  // namespace muster::daemon

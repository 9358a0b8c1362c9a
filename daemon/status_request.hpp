// The `status` request: what musterd knows of its node, open to every client.
//
//   {"version": 1, "request": "status"}
//   reply: {"version": 1, "ok": true,
//           "daemon": {"version": "0.1.0", "git": "abc1234", "uptime_s": 12.5},
//           "node": {"gpus": 8, "compute_major": 9, "interfaces": ["eth0"], "ib_hcas": []},
//           "policy": {"nvls_off": false, "trace_buffer": 2000},
//           "gpus": {"source": "nvml", "driver_version": ..., "devices": [...]},
//           "recent_steps": [{"job", "step", "uid", "state", "started_ms", "ended_ms",
//                             "exit_code"}]}
// Recent steps are public as squeue's jobs are (ids, owners, states); what a job was told and
// why is the job request's, for its owner.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/router.hpp"

namespace muster::daemon {

// How many recent steps status lists.
inline constexpr int kStatusSteps = 20;

// Checks the request (throws bad_request for unknown fields) and returns the work that answers.
request_work status_work(const nlohmann::json& request, const node_context& node);

}  // namespace muster::daemon

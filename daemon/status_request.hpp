// The `status` request: what musterd knows of its node, open to every client.
//
//   {"version": 1, "request": "status"}
//   reply: {"version": 1, "ok": true,
//           "daemon": {"version": "0.1.0", "git": "abc1234", "uptime_s": 12.5},
//           "node": {"gpus": 8, "compute_major": 9, "interfaces": ["eth0"], "ib_hcas": []},
//           "policy": {"nvls_off": false, "trace_buffer": 2000}}
// Not yet: GPU models and memory, NVLink, driver and CUDA versions (with NVML), recent steps
// (with the node store).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace muster::daemon {

struct node_context;

// The reply's fields (JSON object members, as env_reply). Throws bad_request for unknown fields.
std::string status_reply(const nlohmann::json& request, const node_context& node);

}  // namespace muster::daemon

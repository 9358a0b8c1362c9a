// The `env` request: a job step's facts in, the GPU environment policy's decisions out
// (common/gpu_policy.hpp; rules in docs/policy-rules.md).
//
//   {"version": 1, "request": "env",
//    "job": {"tp": 2, "cp": 1, "ep": 1, "gpus": 8, "sharding": "no_shard", "torch_version":
//    "2.5.1",
//            "memory_tight": false, "dump_dir": "/runs/r1",
//            "features": {"nccl_ub": false, "fsdp_double_buffer": false, "tp_comm_overlap": false,
//                         "ep_comm_overlap": false, "expandable_segments": false,
//                         "cuda_graphs": false}},
//    "env": {"PYTORCH_CUDA_ALLOC_CONF": "...", ...}}
// Every field of "job" is optional (defaults as gpu_policy_input; "gpus", the GPUs the step
// sees, defaults to the node's); unknown fields are errors.
//
//   reply: {"version": 1, "ok": true,
//           "set": [{"variable": ..., "value": ..., "rule": ..., "reason": ...}],
//           "unset": [{"variable": ..., "rule": ..., "reason": ...}],
//           "settings": [{"setting": ..., "value": ..., "rule": ..., "reason": ...}],
//           "errors": [{"rule": ..., "message": ...}]}
// "errors" lists combinations that cannot work; the step should not start when it is not empty.
#pragma once

#include <nlohmann/json.hpp>

#include "common/gpu_policy.hpp"

namespace muster::daemon {

struct node_context;

// Thrown for a request that does not read as the schema above; what() names the field.
struct bad_request : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The policy input of an `env` request on this node.
gpu_policy_input parse_env_request(const nlohmann::json& request, const node_context& node);

// The reply's fields for a policy result, as JSON object members: "set":[...],"unset":[...],
// "settings":[...],"errors":[...].
std::string env_reply(const gpu_policy_result& result);

}  // namespace muster::daemon

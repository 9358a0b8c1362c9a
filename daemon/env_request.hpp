// The `env` request: a job step's facts in, the GPU environment policy's decisions out
// (common/gpu_policy.hpp; rules in docs/policy-rules.md).
//
//   {"version": 1, "request": "env",
//    "job": {"id": "4242", "step": "0", "tp": 2, "cp": 1, "ep": 1, "gpus": 8, "sharding":
//    "no_shard", "torch_version": "2.5.1",
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
// With job.id the request is job-scoped (job_access.hpp: root or the job's owner) and its
// decisions are recorded in the node store; without, it is answered at once and kept nowhere.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>

#include "common/gpu_policy.hpp"
#include "daemon/request_fields.hpp"
#include "daemon/router.hpp"

namespace muster::daemon {

// The policy input of an `env` request on this node.
gpu_policy_input parse_env_request(const nlohmann::json& request, const node_context& node);

// The job step an env request names (job.id, job.step), if any.
std::optional<job_ref> env_job_of(const nlohmann::json& request);

// The work that answers a job-scoped env request for `uid` and records its decisions.
request_work env_work(const job_ref& job, gpu_policy_input input, const slurm_lookup& slurm,
                      uid_t uid);

// The reply's fields for a policy result, as JSON object members: "set":[...],"unset":[...],
// "settings":[...],"errors":[...].
std::string env_reply(const gpu_policy_result& result);

}  // namespace muster::daemon

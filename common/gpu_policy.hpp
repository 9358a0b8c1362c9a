// The GPU environment policy: which CUDA, NCCL and PyTorch allocator variables a job step gets,
// decided from its layout and settings, each decision with a rule id and a reason. musterd
// serves it to every job step on its node; when no daemon answers, the launcher applies the
// same library in-process, so the two never disagree.
//
// Rules (ids are stable; they appear in the run store and in `muster diagnose`):
//   cuda-max-connections-tp-cp   TP > 1 or CP > 1 without FSDP sharding: CUDA_DEVICE_MAX_CONNECTIONS=1,
//                                so TP/CP communication kernels are queued before the compute
//                                that needs them (Megatron-LM refuses to start otherwise).
//   cuda-max-connections-fsdp    FSDP sharding (optim_grads, optim_grads_params): unset a
//                                CUDA_DEVICE_MAX_CONNECTIONS of 1, which would serialise the
//                                parameter all-gathers behind compute; a value > 1 is kept.
//   nccl-ub-expandable-segments  comm.nccl_ub with expandable_segments:True in
//                                PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF: refused.
// Not here: applying it to a process (the launcher and the SPANK plugin do), NCCL tuning.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace muster {

// What the policy decides from.
struct gpu_policy_input {
  int tp = 1;
  int cp = 1;
  std::string sharding = "no_shard";  // parallel.sharding
  bool nccl_ub = false;               // comm.nccl_ub
  std::map<std::string, std::string, std::less<>> env;  // the environment the job step has
};

// One decision: set `variable` to `value`, or unset it when value is nullopt.
struct gpu_policy_decision {
  std::string rule;                   // "cuda-max-connections-tp-cp"
  std::string variable;
  std::optional<std::string> value;
  std::string reason;                 // one line for people
};

// The decisions for `input`, in rule order. Throws errc::config naming both settings and the
// fix when the settings conflict (nccl-ub-expandable-segments).
std::vector<gpu_policy_decision> decide_gpu_policy(const gpu_policy_input& input);

// "rule: set VAR=value: reason" (or "unset VAR"), as the run store records a decision.
std::string describe(const gpu_policy_decision& decision);

// Applies the decisions to an environment.
void apply_gpu_policy(const std::vector<gpu_policy_decision>& decisions,
                      std::map<std::string, std::string, std::less<>>& env);

}  // namespace muster

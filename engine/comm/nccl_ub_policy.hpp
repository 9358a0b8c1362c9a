// Whether NCCL user buffers (comm.nccl_ub) may be used in this process: the same rule musterd
// applies (common/gpu_policy, rule nccl-ub-expandable-segments), on the engine's own
// environment and LibTorch version, so a job started without the daemon is refused the same
// way. Plain C++ over the policy; no CUDA needed.
#pragma once

#include <string>

#include "common/gpu_policy.hpp"

namespace muster::engine::comm {

// Throws errc::config with the policy's message when user buffers cannot be combined with
// what `env` (the process's environment) sets, under LibTorch `torch_version`.
void check_nccl_ub_policy(const env_vars& env, const std::string& torch_version);

// The process's environment and this build's LibTorch version.
void check_nccl_ub_policy();

}  // namespace muster::engine::comm

// The user-buffer refusal in the engine: see nccl_ub_policy.hpp.
#include "engine/comm/nccl_ub_policy.hpp"

#include <torch/version.h>

#include <fmt/format.h>

#include "common/error.hpp"

extern char** environ;

namespace muster::engine::comm {

void check_nccl_ub_policy(const env_vars& env, const std::string& torch_version) {
  gpu_policy_input in;
  in.nccl_ub = true;
  in.sharding = "optim_grads_params";
  in.fsdp_double_buffer = true;  // the engine's FSDP buffers are persistent
  in.torch_version = torch_version;
  in.env = env;
  for (const auto& e : decide_gpu_policy(in).errors)
    if (e.rule == "nccl-ub-expandable-segments") MUSTER_THROW(errc::config, "{}", e.message);
}

void check_nccl_ub_policy() {
  env_vars env;
  for (char** e = environ; e && *e; ++e) {
    const std::string item = *e;
    const auto eq = item.find('=');
    if (eq != std::string::npos) env.emplace(item.substr(0, eq), item.substr(eq + 1));
  }
  check_nccl_ub_policy(
      env, fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH));
}

}  // namespace muster::engine::comm

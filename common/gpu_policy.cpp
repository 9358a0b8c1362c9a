// The GPU environment policy: see gpu_policy.hpp.
#include "common/gpu_policy.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace muster {
namespace {

bool fsdp(const std::string& sharding) {
  return sharding == "optim_grads" || sharding == "optim_grads_params";
}

// The allocator variable that holds expandable_segments:True, if any.
std::optional<std::string> expandable_segments_in(const gpu_policy_input& in) {
  for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    auto it = in.env.find(name);
    if (it == in.env.end()) continue;
    std::string conf = it->second;
    for (auto& c : conf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (conf.find("expandable_segments:true") != std::string::npos)
      return fmt::format("{}={}", name, it->second);
  }
  return std::nullopt;
}

}  // namespace

std::vector<gpu_policy_decision> decide_gpu_policy(const gpu_policy_input& in) {
  std::vector<gpu_policy_decision> out;
  if (in.nccl_ub) {
    auto conflict = expandable_segments_in(in);
    MUSTER_CHECK(!conflict, errc::config,
                 "comm.nccl_ub = true and {} cannot be used together: NCCL user-buffer "
                 "registration needs buffers that stay where they were registered, and "
                 "expandable segments remap them; remove expandable_segments:True from the "
                 "allocator settings, or set comm.nccl_ub = false (rule nccl-ub-expandable-segments)",
                 *conflict);
  }
  auto current = in.env.find("CUDA_DEVICE_MAX_CONNECTIONS");
  const bool is_set = current != in.env.end();
  if ((in.tp > 1 || in.cp > 1) && !fsdp(in.sharding)) {
    out.push_back({"cuda-max-connections-tp-cp", "CUDA_DEVICE_MAX_CONNECTIONS", "1",
                   fmt::format("tensor = {}, context = {} without FSDP sharding: one hardware "
                               "queue keeps TP/CP communication ahead of the compute that waits "
                               "for it (Megatron-LM requires it){}",
                               in.tp, in.cp,
                               is_set && current->second != "1"
                                   ? fmt::format("; was {}", current->second)
                                   : "")});
  } else if (fsdp(in.sharding) && is_set && current->second == "1") {
    out.push_back({"cuda-max-connections-fsdp", "CUDA_DEVICE_MAX_CONNECTIONS", std::nullopt,
                   fmt::format("parallel.sharding = {}: CUDA_DEVICE_MAX_CONNECTIONS=1 would "
                               "serialise the FSDP all-gathers behind compute; unset (was 1)",
                               in.sharding)});
  }
  return out;
}

void apply_gpu_policy(const std::vector<gpu_policy_decision>& decisions,
                      std::map<std::string, std::string, std::less<>>& env) {
  for (const auto& d : decisions) {
    if (d.value)
      env[d.variable] = *d.value;
    else
      env.erase(d.variable);
  }
}

std::string describe(const gpu_policy_decision& d) {
  return fmt::format("{}: {} {}: {}", d.rule, d.value ? "set" : "unset",
                     d.value ? d.variable + "=" + *d.value : d.variable, d.reason);
}

}  // namespace muster

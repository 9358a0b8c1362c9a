// The GPU environment policy in the launcher: see launch_policy.hpp.
#include "launcher/launch_policy.hpp"

#include "common/log.hpp"
#include "common/node_network.hpp"

namespace muster::launcher {

std::vector<gpu_policy_decision> decide_launch_policy(const job_config& config,
                                                      const plan::layout& layout, int gpus,
                                                      const env_vars& env) {
  gpu_policy_input in;
  in.tp = layout.tp();
  in.cp = layout.cp();
  in.ep = layout.ep();
  in.sharding = config.parallel.sharding;
  in.nccl_ub = config.comm.nccl_ub;
  in.node.gpus = gpus;
  if (gpus > 0) {  // only the GPU rules read the network
    auto network = probe_node_network();
    in.node.interfaces = std::move(network.interfaces);
    in.node.ib_hcas = std::move(network.ib_hcas);
  }
  in.env = env;
  const auto result = decide_gpu_policy(in);
  for (const auto& s : result.settings)
    log::get("launcher")->warn("{}: {} = {}: {}", s.rule, s.setting, s.value, s.reason);
  return require_gpu_policy(result);
}

}  // namespace muster::launcher

// The GPU environment policy in the launcher: see launch_policy.hpp.
#include "launcher/launch_policy.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/node_network.hpp"
#include "launcher/daemon_client.hpp"

namespace muster::launcher {

bool runs_builtin_engine(const std::vector<std::string>& argv) {
  return !argv.empty() && std::filesystem::path(argv.front()).filename() == "muster-train";
}

int hang_timeout_s(const job_config& config, const std::vector<std::string>& argv) {
  const int set = config.launch.timeout_hang;
  if (set <= 0 || !runs_builtin_engine(argv)) return set;
  return std::max(set, config.comm.timeout + kHangAfterCollective);
}

gpu_policy_input launch_policy_input(const job_config& config, const plan::layout& layout, int gpus,
                                     const env_vars& env, const std::filesystem::path& dump_dir,
                                     bool double_buffer) {
  gpu_policy_input in;
  in.tp = layout.tp();
  in.cp = layout.cp();
  in.ep = layout.ep();
  in.sharding = config.parallel.sharding;
  in.nccl_ub = config.comm.nccl_ub;
  in.fsdp_double_buffer = double_buffer;
  in.node.gpus = gpus;
  in.env = env;
  in.dump_dir = dump_dir.string();
  return in;
}

std::vector<gpu_policy_decision> decide_launch_policy(
    const job_config& config, const plan::layout& layout, const std::vector<std::string>& argv,
    int gpus, const env_vars& env, const daemon_step& step, const std::filesystem::path& dump_dir) {
  // muster-train keeps its FSDP buffers; Megatron-FSDP says so with --fsdp-double-buffer
  const bool double_buffer =
      runs_builtin_engine(argv) ||
      std::find(argv.begin(), argv.end(), "--fsdp-double-buffer") != argv.end();
  auto in = launch_policy_input(config, layout, gpus, env, dump_dir, double_buffer);
  // this node's musterd when one answers (the site's policy and the node's facts), else the
  // same library here
  std::optional<gpu_policy_result> answered;
  if (const auto socket = daemon_socket()) {
    auto answer = ask_daemon_env(*socket, in, step, std::chrono::milliseconds(2000));
    const bool expected = daemon_expected(*socket);
    if (answer.result)
      log::get("launcher")->info("the GPU environment from musterd on {}", socket->string());
    else
      log::get("launcher")
          ->log(expected ? spdlog::level::warn : spdlog::level::debug,
                "{}: the GPU environment policy is applied in-process", answer.why_not);
    answered = std::move(answer.result);
  }
  if (!answered && gpus > 0) {  // the daemon has its own facts; here only the GPU rules read them
    auto network = probe_node_network();
    in.node.interfaces = std::move(network.interfaces);
    in.node.ib_hcas = std::move(network.ib_hcas);
  }
  const auto result = answered ? std::move(*answered) : decide_gpu_policy(in);
  for (const auto& s : result.settings)
    log::get("launcher")->warn("{}: {} = {}: {}", s.rule, s.setting, s.value, s.reason);
  return require_gpu_policy(result);
}

}  // namespace muster::launcher

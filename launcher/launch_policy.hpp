// The GPU environment policy of a job's workers: asked of this node's musterd
// (launcher/daemon_client.hpp), else applied in-process with a warning (common/gpu_policy.hpp,
// the library the daemon serves). The inputs come from the job file, its layout and this node
// (its GPUs, and its interfaces and HCAs from sysfs); the settings it overrides are logged as
// warnings; a refused combination is thrown before any worker starts.
#pragma once

#include <string>
#include <vector>

#include "common/gpu_policy.hpp"
#include "common/job_config.hpp"
#include "launcher/daemon_client.hpp"
#include "launcher/plan/layout.hpp"

namespace muster::launcher {

// The policy input of a job's workers on this node (their layout, `gpus`, `env`, `dump_dir`);
// the node's network is the daemon's to add (or decide_launch_policy's when none answers).
// `double_buffer`: the workers keep their FSDP buffers, registered once under comm.nccl_ub
// (muster-train does; Megatron-FSDP with --fsdp-double-buffer).
gpu_policy_input launch_policy_input(const job_config& config, const plan::layout& layout, int gpus,
                                     const env_vars& env, const std::filesystem::path& dump_dir,
                                     bool double_buffer = false);

// Whether `argv` runs the built-in engine (muster-train).
bool runs_builtin_engine(const std::vector<std::string>& argv);

// The hang detection's limit for `argv`'s ranks: launch.timeout_hang, but for muster-train at
// least comm.timeout + kHangAfterCollective, so that its collective timeouts (which name the
// ranks that never arrived) come first and the hang detection catches what no collective waits
// on. 0: off.
inline constexpr int kHangAfterCollective = 60;
int hang_timeout_s(const job_config& config, const std::vector<std::string>& argv);

// The environment decisions for the workers of a job on this node (`argv` they run, `gpus` it
// sees, `env` the environment they inherit, `dump_dir` where NCCL's flight recorder dumps; the
// daemon records them under `step`). Throws errc::config naming the rule and the fix when the job's
// settings cannot work together.
std::vector<gpu_policy_decision> decide_launch_policy(
    const job_config& config, const plan::layout& layout, const std::vector<std::string>& argv,
    int gpus, const env_vars& env, const daemon_step& step, const std::filesystem::path& dump_dir);

}  // namespace muster::launcher

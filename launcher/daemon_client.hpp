// Asking this node's musterd for a job step's GPU environment (its `env` request,
// daemon/env_request.hpp), so every step on the node gets the site's policy from one place.
// The launcher falls back to the same policy in-process when no daemon answers.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "common/gpu_policy.hpp"

namespace muster::launcher {

// The socket to ask: $MUSTER_DAEMON_SOCKET, else /run/muster/musterd.sock; nullopt when the
// variable is set empty (never ask).
std::optional<std::filesystem::path> daemon_socket();

// One request line to the daemon and its reply line (without the newlines), within `timeout`
// in all; nullopt, with the reason in `why_not`, when it is absent, slow or cut off.
std::optional<std::string> ask_daemon(const std::filesystem::path& socket,
                                      const std::string& request, std::chrono::milliseconds timeout,
                                      std::string& why_not);

struct daemon_answer {
  std::optional<gpu_policy_result> result;  // the daemon's decisions
  std::string why_not;                      // when none: why ("no musterd on ...: ...")
};

// Sends the job step's facts (the policy input's job fields and environment; the node's facts
// are the daemon's own) and reads the reply, within `timeout` in all. Never throws: a daemon
// that is absent, slow, or answers an error gives no result and the reason.
daemon_answer ask_daemon_env(const std::filesystem::path& socket, const gpu_policy_input& job,
                             std::chrono::milliseconds timeout);

}  // namespace muster::launcher

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

// How to start musterd here, for the hint after "no musterd on <socket>": systemctl where
// systemd runs the host (`systemd_dir` exists, as sd_booted() checks), else the command
// docs/quickstart.md gives for hosts without it (as root, in the background; a socket other than
// the default is named with --socket).
std::string daemon_start_hint(const std::filesystem::path& socket,
                              const std::filesystem::path& systemd_dir = "/run/systemd/system");

// One request line to the daemon and its reply line (without the newlines), within `timeout`
// in all; nullopt, with the reason in `why_not`, when it is absent, slow or cut off.
std::optional<std::string> ask_daemon(const std::filesystem::path& socket,
                                      const std::string& request, std::chrono::milliseconds timeout,
                                      std::string& why_not);

// What an error reply says, for one line on stderr: its message and code ("cannot tell who owns
// job 123: ...; try again when slurmctld answers (unavailable)"), never the raw JSON; a reply
// that is no error reply is quoted (its first 200 bytes).
std::string reply_error_text(const std::string& reply);

// The job step musterd records a request under: SLURM_JOB_ID (or a local run's id) and
// SLURM_STEP_ID ("0" for a local run, "batch" for a batch script). Empty job_id: nothing is
// recorded.
struct daemon_step {
  std::string job_id;
  std::string step_id;
};

// Whether a daemon is expected on `socket`: MUSTER_DAEMON_SOCKET names it, or its directory
// exists (the unit keeps /run/muster while musterd is stopped). Where none is expected a
// missing daemon is only logged at debug.
bool daemon_expected(const std::filesystem::path& socket);

struct daemon_answer {
  std::optional<gpu_policy_result> result;  // the daemon's decisions
  std::string why_not;                      // when none: why ("no musterd on ...: ...")
};

// Sends the job step's facts (the policy input's job fields and environment; the node's facts
// are the daemon's own) and reads the reply, within `timeout` in all. Never throws: a daemon
// that is absent, slow, or answers an error gives no result and the reason.
// The env request line for a job step's facts (what ask_daemon_env sends).
std::string env_request_line(const gpu_policy_input& job, const daemon_step& step);

// With a step, the daemon records its decisions under it.
daemon_answer ask_daemon_env(const std::filesystem::path& socket, const gpu_policy_input& job,
                             const daemon_step& step, std::chrono::milliseconds timeout);

// Tell this node's musterd that a step started (its run directory and ranks here) or ended
// (its exit code), so the node keeps its history. Best effort: a daemon that does not answer
// is logged (warn where one is expected) and the run goes on.
void record_step_start(const daemon_step& step, const std::filesystem::path& run_dir,
                       int num_ranks);
void record_step_end(const daemon_step& step, int exit_code);

}  // namespace muster::launcher

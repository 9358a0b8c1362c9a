// Every environment variable that overrides muster's configuration, in one place.
// Config files and `key=value` overrides are the main way to configure muster; these few knobs
// exist for what must be set from outside a job file (a site profile, a debugging session).
// Variables muster SETS for workers (RANK, MASTER_ADDR, ...) and Slurm's own (SLURM_*) are not
// knobs and do not belong here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace muster {

struct env_knob {
  std::string_view name;
  std::string_view doc;
};

inline constexpr std::string_view kEnvLogLevel = "MUSTER_LOG_LEVEL";
inline constexpr std::string_view kEnvDaemonSocket = "MUSTER_DAEMON_SOCKET";
inline constexpr std::string_view kEnvRunsDir = "MUSTER_RUNS_DIR";

inline constexpr env_knob kEnvKnobs[] = {
    {kEnvLogLevel,
     "level of every muster logger (trace, debug, info, warn, error, critical, off); "
     "wins over log.level in the config"},
    {kEnvDaemonSocket,
     "the socket of this node's musterd the launcher asks for the GPU "
     "environment (default /run/muster/musterd.sock; empty: never ask)"},
    {kEnvRunsDir,
     "launch.runs_dir where neither the job file nor the command line sets it, and the runs "
     "status, diagnose and report look in (their --runs-dir)"},
};

// The value of an environment variable, or nullopt when unset. An empty value counts as set.
std::optional<std::string> env_value(std::string_view name);

}  // namespace muster

// A worker's heartbeat file ($MUSTER_HEARTBEAT_FILE) as the launcher reads it.
//
// The file's modification time is the beat: a worker that touches it shows it is alive, and
// one whose file stops changing for launch.timeout_hang is hung. What the file holds, when the
// worker writes anything, says how far it got (common/heartbeat_line.hpp). The built-in engine
// writes a line per step; any worker may.
// Not here: when a rank counts as hung (supervisor.hpp); the console's line (progress_line.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/heartbeat_line.hpp"

namespace muster::launcher {

using muster::heartbeat_progress;

struct heartbeat {
  std::int64_t age_ms = 0;  // since the file last changed
  heartbeat_progress progress;
};

// The age of the rank's heartbeat (a stat, no read: what the hang check polls); std::nullopt
// when the file does not exist (the worker never beat).
std::optional<std::int64_t> heartbeat_age_ms(const std::filesystem::path& file);
// The rank's heartbeat, age and line; std::nullopt when the file does not exist.
std::optional<heartbeat> read_heartbeat(const std::filesystem::path& file);

// Every watched rank's last beat, for a hang report: "rank 0: step 120, 5 ms ago, rank 1:
// step 97, 3012 ms ago, rank 2: never". When the ranks report steps and some are kBehindSteps
// or more behind the furthest, "; behind: rank 1 (step 97 of 120)" names them.
std::string describe_heartbeats(
    const std::vector<std::pair<int, std::optional<heartbeat>>>& ranks);

// Among ranks hung at once (every heartbeat older than launch.timeout_hang), the ones the others
// wait on: those at the lowest step, when each reports a step and they differ. Frozen ranks a
// step apart are no skew: the one behind never reached the collective the others are in. Empty
// when that cannot be told (one rank, no steps, all at the same step).
std::vector<int> hang_culprits(const std::vector<std::pair<int, std::optional<heartbeat>>>& hung);

// "; waited on: rank 1 (step 1 of 2)" for the culprits among `hung`; "" when there are none.
std::string describe_hang_culprits(
    const std::vector<std::pair<int, std::optional<heartbeat>>>& hung);

}  // namespace muster::launcher

// The progress line a worker writes into its heartbeat file ($MUSTER_HEARTBEAT_FILE): the
// protocol between a worker (muster-train, or any program) and its launcher.
//
//     step=120 steps=1000 loss=2.3412 tokens_per_s=51234
//
// One line of key=value words ending in a newline (any of them, in any order; other keys are
// ignored). Write it beside and rename it over the file; a line without its newline (a write
// caught half done) reads as no progress, never as a wrong one.
// Not here: what the launcher does with it (launcher/heartbeat.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace muster {

struct heartbeat_progress {
  std::optional<std::int64_t> step;   // steps done
  std::optional<std::int64_t> steps;  // steps in the run
  std::optional<double> loss;
  std::optional<double> tokens_per_s;
};

// A rank is behind when it is this many steps short of the furthest rank. One step short is
// only the skew of beats written at different moments, never a laggard.
inline constexpr std::int64_t kBehindSteps = 2;

// The progress a heartbeat line says; all empty for an empty or unfinished line.
heartbeat_progress parse_heartbeat(std::string_view text);

// The line a worker writes for `p` (the inverse of parse_heartbeat), newline included.
std::string format_heartbeat(const heartbeat_progress& p);

}  // namespace muster

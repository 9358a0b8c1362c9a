// The progress line `muster run` and `muster launch` keep at the bottom of a terminal: the
// lowest local rank's heartbeat (heartbeat.hpp) as
//
//     step 120/1000 | loss 2.3412 | 51.2k tok/s | ETA 12m03s
//
// ETA comes from the step rate the launcher itself saw between the first heartbeat with a step
// and the latest; "ETA --" until the step has moved. Only on a TTY (supervisor.hpp draws it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "launcher/heartbeat.hpp"

namespace muster::launcher {

class progress_meter {
 public:
  using clock = std::chrono::steady_clock;
  // The line for the progress seen at `now`; std::nullopt while it has no step.
  std::optional<std::string> line(const heartbeat_progress& p, clock::time_point now);

 private:
  std::optional<std::pair<clock::time_point, std::int64_t>> first_;  // first step seen, when
};

// "45s", "12m03s", "3h07m".
std::string format_eta(std::chrono::seconds left);
// "950", "51.2k", "1.20M".
std::string format_rate(double per_s);

}  // namespace muster::launcher

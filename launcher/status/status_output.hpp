// `muster status` as text for people and as JSON for tools (every field, and the per-step
// history).
#pragma once

#include <string>
#include <vector>

#include "launcher/status/run_status.hpp"

namespace muster::launcher::status {

std::string status_text(const run_status& s, store::epoch_ms now);
std::string status_json(const run_status& s, store::epoch_ms now);

std::string runs_text(const std::vector<run_entry>& runs, store::epoch_ms now);
std::string runs_json(const std::vector<run_entry>& runs, store::epoch_ms now);

// "4 s", "12 min", "3 h", "2 d".
std::string age_text(double seconds);

}  // namespace muster::launcher::status

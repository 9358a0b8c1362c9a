// Steps whose launcher is gone: see orphan_steps.hpp.
#include "daemon/orphan_steps.hpp"

#include <fmt/format.h>

#include "common/proc_stat.hpp"

namespace muster::daemon {

int close_orphan_steps(node_store& store, std::int64_t now_ms, const std::string& proc) {
  int closed = 0;
  for (auto step : store.running_steps()) {
    if (step.pid <= 0 || process_started_by(step.pid, step.started_ms, proc)) continue;
    step.state = "cancelled";
    step.ended_ms = now_ms;
    step.message = fmt::format(
        "its launcher (pid {}) was gone without recording the step's end (killed, or it ended "
        "while musterd was down); the run's own store has how it ended",
        step.pid);
    closed += store.step_ended(step) ? 1 : 0;
  }
  return closed;
}

}  // namespace muster::daemon

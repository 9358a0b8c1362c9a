// Steps whose launcher is gone: see orphan_steps.hpp.
#include "daemon/orphan_steps.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace muster::daemon {
namespace {

// The boot time from /proc/stat ("btime 1795000000"), epoch seconds; 0 when unreadable.
std::int64_t boot_time_s(const std::string& proc) {
  std::ifstream stat(proc + "/stat");
  for (std::string word; stat >> word;)
    if (word == "btime") {
      std::int64_t s = 0;
      stat >> s;
      return s;
    }
  return 0;
}

}  // namespace

bool started_by(std::int64_t pid, std::int64_t started_ms, const std::string& proc) {
  if (pid <= 0) return false;
  std::ifstream stat(fmt::format("{}/{}/stat", proc, pid));
  std::string line;
  if (!std::getline(stat, line)) return false;  // gone
  // "pid (comm) state ppid ...": starttime is field 22, the 20th after the comm (field 2),
  // whose name may hold spaces and parentheses
  const auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 0; i < 19 && fields >> field;) ++i;
  std::int64_t ticks = 0;
  if (!(fields >> ticks)) return true;  // running; when it started cannot be told
  const auto boot = boot_time_s(proc);
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (boot <= 0 || hz <= 0) return true;
  const std::int64_t began_ms = boot * 1000 + ticks * 1000 / hz;
  return began_ms <= started_ms + 5000;
}

int close_orphan_steps(node_store& store, std::int64_t now_ms, const std::string& proc) {
  int closed = 0;
  for (auto step : store.running_steps()) {
    if (step.pid <= 0 || started_by(step.pid, step.started_ms, proc)) continue;
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

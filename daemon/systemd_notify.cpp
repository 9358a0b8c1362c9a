// sd_notify for musterd: see systemd_notify.hpp.
#include "daemon/systemd_notify.hpp"

#include <systemd/sd-daemon.h>

#include <string>

namespace muster::daemon {

void notify(std::string_view state) {
  sd_notify(0, std::string(state).c_str());
}

std::optional<std::chrono::microseconds> watchdog_interval() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec / 2);
}

}  // namespace muster::daemon

// Telling systemd how musterd is (sd_notify): READY=1, STOPPING=1, and WATCHDOG=1 pings when the
// unit has WatchdogSec=. Without NOTIFY_SOCKET (a foreground run, a test) every call is a no-op.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace muster::daemon {

void notify(std::string_view state);

// Half of WATCHDOG_USEC when systemd watches this process, else nullopt.
std::optional<std::chrono::microseconds> watchdog_interval();

}  // namespace muster::daemon

// Steps whose launcher is gone without recording their end: a launcher killed with SIGKILL, or
// a step that ended while musterd was down (a restart). musterd looks at start and with each
// prune; the epilog's job-end covers Slurm jobs, this covers what no epilog follows.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/node_store.hpp"

namespace muster::daemon {

// Whether process `pid` runs and started by `started_ms` (epoch ms, with a few seconds' grace):
// a pid of a later process is another's. `proc` is /proc (a parameter for tests).
bool started_by(std::int64_t pid, std::int64_t started_ms, const std::string& proc = "/proc");

// Marks `store`'s running steps whose launcher pid is gone as cancelled at `now_ms`, saying so;
// returns how many. Throws errc::store.
int close_orphan_steps(node_store& store, std::int64_t now_ms, const std::string& proc = "/proc");

}  // namespace muster::daemon

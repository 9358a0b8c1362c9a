// Steps whose launcher is gone without recording their end: a launcher killed with SIGKILL, or
// a step that ended while musterd was down (a restart). musterd looks at start and with each
// prune; the epilog's job-end covers Slurm jobs, this covers what no epilog follows.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/node_store.hpp"

namespace muster::daemon {

// Marks `store`'s running steps whose launcher pid is gone (or is a later process's:
// common/proc_stat.hpp) as cancelled, saying so; returns how many. Each ended at its run
// directory's last store write (node-*.db), or at `now_ms` when none dates it. Throws
// errc::store.
int close_orphan_steps(node_store& store, std::int64_t now_ms, const std::string& proc = "/proc");

}  // namespace muster::daemon

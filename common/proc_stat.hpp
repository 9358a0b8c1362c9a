// What /proc/<pid>/stat says of a process that muster needs: its state letter and when it
// started. Used to tell a process still running from a zombie, and a pid's process from a later
// one given the same pid (after the first ended, or after a reboot). Linux only; `proc` is /proc
// (a parameter for tests).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace muster {

struct proc_stat {
  char state = '?';             // 'R', 'S', 'D', 'Z' (zombie), ... as proc(5) lists them
  std::int64_t pgrp = 0;        // its process group
  std::int64_t started_ms = 0;  // epoch ms it started (boot time + starttime); 0: not known
  // stopped by a signal (SIGSTOP, ^Z) or by a debugger's trace: it runs no more until continued
  bool stopped() const { return state == 'T' || state == 't'; }
};

// The process's stat, or nullopt when there is no such process (or its stat cannot be read).
std::optional<proc_stat> read_proc_stat(std::int64_t pid, const std::string& proc = "/proc");

// Those of `pids` (ranks' processes) that are stopped, or that lead a process group holding a
// stopped process (what a wrapper script started, such as `bash train.sh` running python). One
// pass over `proc`.
std::set<std::int64_t> stopped_groups(const std::vector<std::int64_t>& pids,
                                      const std::string& proc = "/proc");

// Whether process `pid` is there, not a zombie, and started by `started_ms` (epoch ms) with a
// few seconds' grace: a process that started later is another one given the same pid. A start
// that cannot be told is taken as in time.
bool process_started_by(std::int64_t pid, std::int64_t started_ms,
                        const std::string& proc = "/proc");

}  // namespace muster

// When a log line says it was written, so findings from different files can be put in time
// order (a timeout that follows another failure is its knock-on effect, wherever the files
// put it). Read from the line's first 80 bytes, in the forms training logs carry:
//   glog (PyTorch's C++):  "[E1122 03:12:44.123456 2211 ProcessGroupNCCL.cpp:616]", "E1122 ..."
//   ISO:                   "2026-11-22T03:12:44", "[2026-11-22 03:12:44.235]" (spdlog, Python
//                          logging, Slurm's "CANCELLED AT 2026-11-22T03:00:01")
//   dmesg -T:              "[Sun Nov 22 03:12:44 2026]"
//   syslog, journalctl:    "Nov 22 03:12:44 host kernel: ..."
// A form without a year takes the current one. The times are read in this host's zone (the
// nodes' logs are written in theirs: one cluster, one zone), so they compare with the run
// store's epoch times.
#pragma once

#include <optional>
#include <string_view>

namespace muster::launcher::diagnose {

// Seconds since the epoch (fractions kept) the line's timestamp gives, or nullopt.
std::optional<double> time_of_line(std::string_view line);

}  // namespace muster::launcher::diagnose

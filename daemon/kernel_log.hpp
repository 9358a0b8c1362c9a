// NVIDIA Xid errors in the kernel log: the driver's "NVRM: Xid (PCI:0000:3b:00): 79, pid=...,
// GPU has fallen off the bus." lines, read from /dev/kmsg (health.kernel_log; root can read
// it) or from a file of records in the same format, which tests write.
//
// A /dev/kmsg record is "<priority>,<sequence>,<microseconds since boot>,<flags>;<message>";
// continuation lines start with a space and are skipped.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::daemon {

struct xid_event {
  int xid = 0;
  std::optional<std::uint64_t> pci;  // pci_key() of the GPU, when the line names one
  std::int64_t boot_us = 0;          // when, in microseconds since boot (CLOCK_MONOTONIC)
  std::string message;               // the driver's line, after "NVRM: "
};

// The Xid event in one kmsg record, or nullopt for any other record.
std::optional<xid_event> parse_xid_record(std::string_view record);

// Whether an Xid means the GPU (not the program) is at fault: memory errors (48, 63, 64, 92,
// 94, 95), fallen off the bus (79), NVLink (74), GSP and firmware (119, 120, 140) and the like.
// Program faults (13, 31, 43, 45) are not.
bool xid_is_hardware(int xid);

struct kernel_log_read {
  std::vector<xid_event> xids;  // oldest first
  std::string why_not;          // set when the log could not be read
};

// The Xid events of the last `window` in the log at `path`. Never blocks: reads what is there.
kernel_log_read recent_xids(const std::filesystem::path& path, std::chrono::seconds window);

// Microseconds since boot now, on the clock kmsg stamps its records with.
std::int64_t boot_clock_us();

}  // namespace muster::daemon

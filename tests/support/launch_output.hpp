// Reading what launched workers and launchers left behind, for the launcher's integration
// tests: the run directory, muster-test-worker's contract line, and events in a run store.
#pragma once

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_store_records.hpp"

namespace muster::test {

// The one run directory under `runs` (a test's launcher made exactly one). Throws
// std::runtime_error listing what is there otherwise.
inline std::filesystem::path only_run_dir(const std::filesystem::path& runs) {
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(runs))
    if (e.is_directory()) dirs.push_back(e.path());
  if (dirs.size() != 1)
    throw std::runtime_error(std::to_string(dirs.size()) + " run directories under " +
                             runs.string() + ", expected 1");
  return dirs.front();
}

// muster-test-worker's first line: "rank R of W (local L of N, node G) master 127.0.0.1:P run
// ID restart K".
struct contract_line {
  int rank = 0, world = 0, local = 0, local_world = 0, node = 0, port = 0, restart = 0;
  bool operator==(const contract_line&) const = default;
};

// For Catch's messages: "rank 3 of 4 (local 1 of 2, node 1) port 29500 restart 0".
inline std::ostream& operator<<(std::ostream& out, const contract_line& c) {
  return out << "rank " << c.rank << " of " << c.world << " (local " << c.local << " of "
             << c.local_world << ", node " << c.node << ") port " << c.port << " restart "
             << c.restart;
}

// What rank `rank` of 2 nodes x 2 ranks must have been told, on MASTER_PORT `port`.
inline contract_line two_nodes_of_two(int rank, int port) {
  return {rank, 4, rank % 2, 2, rank / 2, port, 0};
}

// Every contract line in `text` (a log or a captured stdout), in order.
inline std::vector<contract_line> contract_lines(const std::string& text) {
  std::vector<contract_line> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    contract_line c;
    char run_id[256];
    if (std::sscanf(line.c_str(),
                    "rank %d of %d (local %d of %d, node %d) master 127.0.0.1:%d run %255s "
                    "restart %d",
                    &c.rank, &c.world, &c.local, &c.local_world, &c.node, &c.port, run_id,
                    &c.restart) == 8)
      out.push_back(c);
  }
  return out;
}

// How many events of `kind` whose message contains `text` are among `events`.
inline int count_events(const std::vector<store::event_record>& events, const std::string& kind,
                        const std::string& text = {}) {
  int n = 0;
  for (const auto& e : events) n += e.kind == kind && e.message.find(text) != std::string::npos;
  return n;
}

// Whether an event of `kind` whose message contains `text` is among `events`.
inline bool has_event(const std::vector<store::event_record>& events, const std::string& kind,
                      const std::string& text = {}) {
  return count_events(events, kind, text) > 0;
}

}  // namespace muster::test

// Copies the workers' per-step lines (common/step_line.hpp) into the run store: each call to
// collect() reads what each rank's steps file gained since the last call, up to its last
// complete line, and writes the records in one transaction. Called on the supervisor's tick
// and once more after the workers end, so the store trails the workers by a fraction of a
// second and the workers never wait on SQLite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include "common/run_store_records.hpp"

namespace muster::launcher {

class step_collector {
 public:
  // Ranks `ranks`, each writing `file_of(rank)`; `write` stores a batch (e.g. add_steps).
  step_collector(std::vector<int> ranks, std::function<std::filesystem::path(int)> file_of,
                 std::function<void(const std::vector<store::step_record>&)> write);
  // Reads and stores what is new; returns how many records it stored.
  std::size_t collect();

 private:
  std::vector<int> ranks_;
  std::function<std::filesystem::path(int)> file_of_;
  std::function<void(const std::vector<store::step_record>&)> write_;
  std::map<int, std::uintmax_t> read_up_to_;  // bytes of each file already read
};

}  // namespace muster::launcher

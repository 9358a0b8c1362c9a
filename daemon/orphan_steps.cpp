// Steps whose launcher is gone: see orphan_steps.hpp.
#include "daemon/orphan_steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "common/proc_stat.hpp"

namespace muster::daemon {
namespace {

// When the step's run last wrote its store: the newest of the run directory's node files
// (node-*.db and their -wal), as a launcher writes its last records and then dies; nothing when
// none can be read.
std::optional<std::int64_t> last_store_write_ms(const std::string& run_dir) {
  std::optional<std::int64_t> newest;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const auto name = entry.path().filename().string();
    // not the -shm file, which readers (status, diagnose) touch too
    if (!name.starts_with("node-") || !(name.ends_with(".db") || name.ends_with(".db-wal")))
      continue;
    const auto written = entry.last_write_time(ec);
    if (ec) continue;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::file_clock::to_sys(written).time_since_epoch())
                        .count();
    newest = std::max(newest.value_or(ms), static_cast<std::int64_t>(ms));
  }
  return newest;
}

}  // namespace

int close_orphan_steps(node_store& store, std::int64_t now_ms, const std::string& proc) {
  int closed = 0;
  for (auto step : store.running_steps()) {
    if (step.pid <= 0 || process_started_by(step.pid, step.started_ms, proc)) continue;
    step.state = "cancelled";
    // the run's last record, where it says one after the step's start; else when found
    const auto last = last_store_write_ms(step.run_dir);
    const bool dated = last && *last >= step.started_ms && *last <= now_ms;
    step.ended_ms = dated ? *last : now_ms;
    step.message = fmt::format(
        "its launcher (pid {}) was gone without recording the step's end (killed, or it ended "
        "while musterd was down); {}; the run's own store has how it ended",
        step.pid,
        dated ? fmt::format("its end is its run store's last write, {:.0f} s before musterd "
                            "found it",
                            double(now_ms - *last) / 1000)
              : "its end is when musterd found it (no run store to date it)");
    closed += store.step_ended(step) ? 1 : 0;
  }
  return closed;
}

}  // namespace muster::daemon

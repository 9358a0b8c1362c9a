// What a run directory's store adds to `muster diagnose`, beside its logs: the errors the
// workers left in their error files (their message decides the category, else their kind), the
// ranks muster's hang detection stopped, the ranks that died without an error file (killed by
// SIGKILL, or an exit code), and a per-rank analysis of the steps: step-time distribution, the
// ranks more than 20% slower than the median (stragglers), the rank whose heartbeat is oldest,
// the measured memory peak beside the planner's estimate.
// Not here: reading the store (launcher/status/run_status.hpp), the logs (diagnose_verbs.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/run_store_records.hpp"
#include "launcher/diagnose/diagnosis.hpp"
#include "launcher/status/run_status.hpp"

namespace muster::launcher::diagnose {

// A rank is a straggler when its median step time is more than this much above the median.
inline constexpr double kStragglerSlowdown = 0.20;

struct rank_timing {
  std::int64_t rank = 0;
  std::string host;
  std::int64_t steps = 0;  // steps it reported
  double median_step_s = 0;
  double p90_step_s = 0;
  double slower = 0;  // median_step_s / the run's median - 1
  bool straggler = false;
  std::optional<double> heartbeat_age_s;
  std::int64_t peak_mem_bytes = 0;
};

struct rank_analysis {
  double median_step_s = 0;        // the median of the ranks' medians; 0: no steps
  std::vector<rank_timing> ranks;  // by rank, those that reported steps
  std::vector<std::int64_t> stragglers;
  std::optional<std::int64_t> oldest_heartbeat_rank;  // among running ranks with a heartbeat
  double oldest_heartbeat_age_s = 0;
  std::int64_t peak_mem_bytes = 0;  // the highest of any rank
  std::optional<std::int64_t> peak_mem_rank;
  std::int64_t planned_mem_bytes = 0;  // the planner's worst-stage estimate; 0: unknown
};

// The signals of the store of `run` (errors, hang events, failed ranks) into `d`, with the
// ranks' hosts. Evidence names "<run dir>/node-*.db" and the table.
void add_store_findings(diagnoser& d, const status::run_status& run,
                        const std::vector<store::event_record>& events);

// The steps and heartbeats of `run`, per rank; `planned_mem_bytes` from the planner (0: none).
rank_analysis analyse_ranks(const status::run_status& run, std::int64_t planned_mem_bytes);

}  // namespace muster::launcher::diagnose

// What a run directory's store adds to `muster diagnose`, beside its logs: the errors the
// workers left in their error files (their message decides the category, else their kind), the
// ranks muster's hang detection stopped, the ranks that died without an error file (killed by
// SIGKILL, or an exit code), and a per-rank analysis of the steps: step-time distribution, the
// ranks more than 20% slower than the median (stragglers), the rank whose heartbeat is oldest,
// the measured memory peak beside the planner's estimate.
//
// Slower by what: in synchronous training every rank's step takes as long as the slowest's (the
// others wait for it in the collectives), so when every rank reports the time it was blocked in
// collectives (comm_wait_s, as muster's engine does) a rank's pace is its busy time, the step
// time less that wait; else (a worker that does not report it) the step time itself.
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
  double median_busy_s = 0;  // step time less collective waits; NaN: not reported
  double slower = 0;         // its pace (busy, else step time) / the run's median pace - 1
  bool straggler = false;
  std::optional<double> heartbeat_age_s;
  std::int64_t peak_mem_bytes = 0;
};

struct rank_analysis {
  double median_step_s = 0;        // the median of the ranks' medians; 0: no steps
  double median_busy_s = 0;        // the same of busy times; NaN: not every rank reports them
  bool by_busy = false;            // stragglers judged by busy time (else by step time)
  std::vector<rank_timing> ranks;  // by rank, those that reported steps
  std::vector<std::int64_t> stragglers;
  std::optional<std::int64_t> oldest_heartbeat_rank;  // among running ranks with a heartbeat
  double oldest_heartbeat_age_s = 0;
  std::int64_t peak_mem_bytes = 0;  // the highest of any rank
  std::optional<std::int64_t> peak_mem_rank;
  // what that rank's figures measured (step_record::mem_device): "cuda", "cpu"; empty: not said.
  // Without a measure, "cpu" where the launchers said the ranks had no GPU (a "devices" event)
  std::string peak_mem_device;
  std::int64_t planned_mem_bytes = 0;  // the planner's worst-stage estimate; 0: unknown
};

// The signals of the store of `run` (errors, hang events, failed ranks) into `d`, with the
// ranks' hosts. Evidence names "<run dir>/node-*.db" and the table.
void add_store_findings(diagnoser& d, const status::run_status& run,
                        const std::vector<store::event_record>& events);

// The steps and heartbeats of `run`, per rank; `planned_mem_bytes` from the planner (0: none).
rank_analysis analyse_ranks(const status::run_status& run, std::int64_t planned_mem_bytes);

// The measured peak and the planner's estimate in words, each saying what it counts:
// "measured peak 61.2 GiB on rank 3 (GPU memory PyTorch's allocator reserved); the planner
// estimated 58.0 GiB a GPU", or for ranks on the CPU "... (resident memory, on the CPU); the
// planner estimated 1.2 GiB a rank without a GPU's reserve". Empty when neither is known.
std::string memory_words(const rank_analysis& a);

}  // namespace muster::launcher::diagnose

// The records of the run store: a run, a rank, a training step and an event, as plain structs
// with their state enums. The node writer (run_store.hpp) stores them and the reader
// (run_reader.hpp) returns them. They hold no SQL and do no I/O.
//
// Times are integer milliseconds since the Unix epoch (UTC), in fields ending `_ms`.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace muster::store {

// Milliseconds since the Unix epoch, UTC.
using epoch_ms = std::int64_t;

// The current wall-clock time as epoch_ms.
epoch_ms now_ms();

enum class run_state { created, running, succeeded, failed, cancelled };
enum class rank_state { pending, running, succeeded, failed, killed };
enum class severity { debug, info, warn, error };

// Stable lower-case names ("running", "warn"): what the store writes and `muster status` shows.
std::string_view to_string(run_state state);
std::string_view to_string(rank_state state);
std::string_view to_string(severity level);
// The inverse of to_string; nullopt for any other text.
std::optional<run_state> parse_run_state(std::string_view text);
std::optional<rank_state> parse_rank_state(std::string_view text);
std::optional<severity> parse_severity(std::string_view text);

// A metric a worker did not report.
inline constexpr double kNotReported = std::numeric_limits<double>::quiet_NaN();

// One training run, as its node's launcher sees it. Every node file holds at most one.
struct run_record {
  std::string run_id;  // the run directory's name, see make_run_id
  std::string name;    // the job name from the config
  run_state state = run_state::created;
  epoch_ms created_ms = 0;
  epoch_ms updated_ms = 0;
  std::int64_t world_size = 0;  // number of ranks in the job
  std::int64_t num_nodes = 0;
  std::optional<std::string> slurm_job_id;  // text: array jobs read "1234_7"; none outside Slurm
  std::string config_path;                  // the resolved config, usually <run_dir>/job.toml
  std::string config_text;                  // its contents, or empty when only the path is kept
  std::optional<std::string> slurm_cluster;  // SLURM_CLUSTER_NAME of the job; none outside Slurm
  // an array task's own SLURM_JOB_ID ("1241" where slurm_job_id reads "1234_7"); none elsewhere
  std::optional<std::string> slurm_task_job_id;
  bool operator==(const run_record&) const = default;
};

// One rank (a worker process). Keyed by the global rank: putting it again replaces it.
struct rank_record {
  std::int64_t rank = 0;            // global rank, 0 .. world_size-1
  std::string host;                 // the node it runs on
  std::int64_t local_rank = 0;      // its index among the ranks of that node
  std::optional<std::int64_t> pid;  // none before it was started
  rank_state state = rank_state::pending;
  std::optional<std::int64_t> exit_code;  // set when it exited
  std::optional<std::int64_t> signal;     // set when a signal ended it
  epoch_ms updated_ms = 0;
  bool operator==(const rank_record&) const = default;
};

// What one rank reported for one optimizer step. Keyed by (rank, step): a step written again
// (a run resumed from a checkpoint repeats steps) replaces the earlier row.
struct step_record {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  double loss = 0;             // NaN is kept (a diverged run is worth recording)
  std::int64_t tokens = 0;     // tokens processed in this step by this rank
  double step_time_s = 0;      // wall time of the step, seconds
  std::int64_t mem_bytes = 0;  // peak device (or host) memory during the step
  epoch_ms time_ms = 0;        // when the step finished
  // What the built-in engine adds (NaN: not reported; the store keeps NULL).
  double aux_loss = kNotReported;      // load-balancing loss, times its coefficient
  double z_loss = kNotReported;        // router z-loss, times its coefficient
  double grad_norm = kNotReported;     // global gradient norm before clipping
  double lr = kNotReported;            // learning rate of the step
  double tokens_per_s = kNotReported;  // this rank's tokens / step_time_s
  double mfu = kNotReported;           // model FLOPs utilisation, 0..1
  std::int64_t peak_mem_bytes = 0;     // peak device (or host RSS) memory so far; 0: none
  double comm_wait_s = kNotReported;   // of step_time_s, the time blocked in collectives
                                       // (waiting for the others, and the transfer)
  // What mem_bytes and peak_mem_bytes measured: "cuda" (the CUDA caching allocator's reserved
  // bytes on the rank's GPU), "cpu" (the process's resident memory); empty: not said.
  std::string mem_device = {};
  // Equal when every field is, a NaN equal to a NaN (not reported, or a diverged loss).
  bool operator==(const step_record& o) const;
};

// Something that happened: a rank started or died, a watchdog fired, a node lost contact.
struct event_record {
  epoch_ms time_ms = 0;
  std::optional<std::int64_t> rank;  // none: the node or its launcher
  severity level = severity::info;
  std::string kind;     // short machine-readable tag, "rank_exit"
  std::string message;  // one line for people
  bool operator==(const event_record&) const = default;
};

// A rank's failure as its error file tells it (common/worker_error.hpp).
struct error_record {
  epoch_ms time_ms = 0;
  std::int64_t rank = 0;
  std::optional<std::int64_t> step;  // 0-based step it failed in; none before the first
  std::string phase;                 // startup, data, forward, backward, optimizer,
                                     // checkpoint; "" when the worker did not say
  std::string kind;                  // exception, collective_timeout, oom, bad_input
  std::string message;
  bool operator==(const error_record&) const = default;
};

}  // namespace muster::store

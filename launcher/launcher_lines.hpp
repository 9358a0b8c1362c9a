// The texts muster's launcher writes that `muster diagnose` reads back: the run store's
// "program" event and each node launcher's first line in Slurm's output. One place, so the
// writer and the reader change together.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/run_store_records.hpp"

namespace muster::launcher {

// The "program" event's message, before the program's path: "the ranks run /usr/bin/muster-train".
inline constexpr std::string_view kProgramSaid = "the ranks run ";

// The "devices" event's message of a node whose ranks get no GPU (none there, or
// CUDA_VISIBLE_DEVICES empty): diagnose then reads the run's memory as a CPU run's.
inline constexpr std::string_view kNoGpuSaid =
    "no GPU for the ranks of this node (no /dev/nvidia* device, or CUDA_VISIBLE_DEVICES empty)";

// How a hang event names a rank the others wait on because its process is stopped (state T):
// "; waited on: rank 1 (its process is stopped: SIGSTOP or a debugger holds it)".
inline constexpr std::string_view kStoppedSaid =
    "its process is stopped: SIGSTOP or a debugger holds it";

// How a node's launcher says another node's launcher vanished mid-run (its connection to the
// rendezvous store closed without its last word): "the launcher on n2 (node 1) is gone: ...".
inline constexpr std::string_view kLauncherGone = ") is gone: its connection to the rendezvous";

// How the launcher names the rank whose end stopped the others: on stderr ("muster: rank 1 on
// gpu-a07 failed first (signal 9 (SIGKILL)); ..."), in its first_failure event ("rank 1 on
// gpu-a07 (pid 4242) failed first: exit code 1; ...") and in a node's failure told to the other
// nodes. diagnose reads what follows it: " (" or ": ", then "signal N (NAME)" or "exit code N".
inline constexpr std::string_view kFailedFirst = " failed first";

// A rank that ended well (exit code 0) this long or more before the first failure, while its
// peers ran on, is said beside it: ended_early's words.
inline constexpr std::int64_t kEndedEarlyMs = 100;  // its peers' collectives fail within ms
inline constexpr std::string_view kEndedWell = " had ended well (exit code 0) ";
std::string ended_early(std::int64_t rank, std::int64_t before_ms);

// Beside the first failure of ranks found hung at once with nothing to tell them apart.
std::string hung_together(const std::vector<int>& ranks);

// The "time_limit" event's message, before Slurm's text of the job's limit as squeue gives it:
// "Slurm's time limit of this job: 4:00:00 (squeue)". It holds however the limit was set (an
// sbatch --time, slurm.time, the partition's default), which diagnose's advice needs.
inline constexpr std::string_view kTimeLimitSaid = "Slurm's time limit of this job: ";
// The limit the newest "time_limit" event says, in Slurm's text; nullopt without one.
std::optional<std::string> recorded_time_limit(const std::vector<store::event_record>& events);

// The "first_step" event's message, before the steps rank 0 had done at its first report of a
// start (its steps file's first line's step, counted from 0, or its heartbeat's step=, which
// counts the steps done): "rank 0 had done 162 steps at its first report of this start (its
// steps file)".
inline constexpr std::string_view kFirstStepSaid = "rank 0 had done ";
// Each "first_step" event's time and steps done, in the events' order.
std::vector<std::pair<store::epoch_ms, std::int64_t>> recorded_first_steps(
    const std::vector<store::event_record>& events);

// Whether a run's "program" events say its ranks ran muster-train; nullopt without one (a muster
// before 2026-11-27).
std::optional<bool> ran_builtin_engine(const std::vector<store::event_record>& events);

// Whether every node's "devices" event says its ranks got no GPU; nullopt without one.
std::optional<bool> ran_without_gpus(const std::vector<store::event_record>& events);

// A node launcher's first line under `muster launch` (one launcher per node):
// "muster: node 1 of 2 (gpu-a02) starts ranks 8-15 of 16; run directory /runs/tiny-moe-4242".
// In Slurm's output it tells srun's "task N" apart from a rank: task N is node N's launcher.
std::string node_start_line(int node, int num_nodes, const std::string& host, int first_rank,
                            int local_ranks, int world_size, const std::filesystem::path& run_dir);

// Whether `line` (without srun -l's label) is node_start_line's.
bool is_node_start_line(std::string_view line);

}  // namespace muster::launcher

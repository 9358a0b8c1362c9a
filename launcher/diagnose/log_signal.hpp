// One log line read for what it says about a failure: the line classifier of `muster
// diagnose`. Pure: a line in, a signal (or none) out. Knows the lines as the upstream projects
// print them: PyTorch's CUDA OOM in each generation of its message, ProcessGroupNCCL's watchdog,
// NCCL's system errors, c10d's TCPStore, Slurm's slurmstepd and srun, and the NVIDIA driver's
// Xid lines (as dmesg or journalctl print them).
//
// A line's rank comes from the prefix its launcher put there: torchrun's "[rank3]:" or
// "[default3]:", srun -l's "3: ", muster's "[rank 3]".
// Not here: which signal is the root cause and which are knock-on effects (diagnosis.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace muster::launcher::diagnose {

// A category id of `muster diagnose` (stable: used in --json).
struct log_signal {
  std::string category;  // cuda_oom, nccl_timeout, host_oom_kill, slurm_time_limit, ...
  std::optional<int> rank;
  std::map<std::string, std::string> facts;  // what the line says: "tried_to_allocate", ...
  std::vector<int> more_ranks{};             // a line about several ("tasks 0-7: Killed")
  std::vector<std::string> hosts{};          // the nodes it is about, where it names no rank
};

// The signal in `line`, or nullopt for a line that says nothing about a failure. A bare
// "Killed" is no signal: without evidence it is not an OOM.
std::optional<log_signal> match_log_line(std::string_view line);

// The ranks muster's hang line says the other hung ranks waited on ("...; waited on: rank 1, 3
// (step 1 of 2)", launcher/heartbeat.hpp's hang_culprits); empty when it names none.
std::vector<int> hang_waited_on(std::string_view line);

// The signal of muster's hang line (its stderr line, or the run store's hang event) about rank
// `hung`: the hang is the rank it waited on where it names one, and a stopped process is said
// (fact "stopped").
log_signal muster_hang_signal(std::string_view line, std::optional<int> hung);

// Whether `line` is muster's engine's line of a failed collective (engine/comm/laggards.hpp):
// "[rank 1/4 group world] all_reduce seq=12 bytes=4096 timed out after 600000 ms; not arrived:
// ..." or "... failed after 812 ms (timeout 600000 ms); not arrived: ...".
bool engine_collective_line(std::string_view line);

// Words at least one of which every line match_log_line takes holds: a reader may skip the
// lines without any of them.
std::span<const std::string_view> signal_keywords();

// The rank a launcher's prefix gives the line, if any.
std::optional<int> rank_of_line(std::string_view line);

// srun -l's label of `line` ("3" of "3: text", or of " 3: text" padded to the widest), a view
// into it; "" for a line without one. Whose task it is (a rank, or a node's launcher) is the
// reader's to know.
std::string_view srun_label(std::string_view line);
// `line` without its srun -l label.
std::string_view unlabelled(std::string_view line);

// `line` without the prefixes a launcher put before a rank's own text: the spaces muster's
// launcher indents a failed rank's last lines with, srun -l's "3: ", then torchrun's "[rank3]:"
// and "[default3]:" and muster's "[rank 3] ", one or several ("[default3]:[rank3]: ").
std::string_view rank_text(std::string_view line);

// Python's traceback, in a rank's text (rank_text): its first line, "Traceback (most recent call
// last):", and the exception line that ends it: a name ending in Error or Exception, dotted or
// not, at the start of the text, then ": message" or nothing ("RuntimeError: boom",
// "torch.distributed.DistBackendError: ...", "AssertionError"). An indented source line that
// names one ("    raise RuntimeError(...)") is neither.
bool traceback_start(std::string_view text);
bool exception_line(std::string_view text);

}  // namespace muster::launcher::diagnose

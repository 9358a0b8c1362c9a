// One line per optimizer step that a worker appends to its steps file ($MUSTER_STEPS_FILE);
// the node's launcher reads new lines as they come and writes them to the run store in
// batches, so the worker never waits on SQLite:
//
//     step=12 loss=3.4021 tokens=512 step_time_s=0.031 mem_bytes=183500800 time_ms=1795...
//
// and, from the built-in engine, aux_loss z_loss grad_norm lr tokens_per_s mfu peak_mem_bytes
// (left out when not reported) and mem_device (what the memory figures measured: cuda, the
// CUDA caching allocator's reserved bytes; cpu, the resident memory).
//
// key=value words ending in a newline, in any order; `step` is required, the others default to
// 0; other keys are ignored. `step` is the step's index, counted from 0 (the first step is
// step=0), where the heartbeat's step= (heartbeat_line.hpp) counts the steps done. A line without
// its newline (still being written) is not read yet.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/run_store_records.hpp"

namespace muster {

// The line for `s` (its rank is not written: the file is the rank's), newline included.
std::string format_step_line(const store::step_record& s);

// The record of one complete line (rank left 0), or std::nullopt for a line without a valid
// step (a malformed line is skipped, never a reason to stop a run).
std::optional<store::step_record> parse_step_line(std::string_view line);

// Every complete line of a steps file, in the order written (the file is appended to by every
// attempt of the run, so a step may come more than once); no file reads as none.
std::vector<store::step_record> read_step_file(const std::filesystem::path& file);

}  // namespace muster

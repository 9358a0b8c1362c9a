// The error file a failing worker leaves at $TORCHELASTIC_ERROR_FILE, in torchelastic's JSON so
// tools that read torchrun's error files read ours, with muster's fields in extraInfo:
//
//   {"message": {"message": "...", "extraInfo": {"timestamp": "1795000000",
//     "muster_phase": "backward", "muster_step": 12, "muster_kind": "collective_timeout"}}}
//
// The launcher reads it back when the rank fails and records it in the run store's errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/run_store_records.hpp"

namespace muster {

struct worker_error {
  std::string message;
  std::string phase;  // startup, data, forward, backward, optimizer, checkpoint; "" = unknown
  std::string kind;   // exception, collective_timeout, oom, bad_input; "" = unknown
  std::optional<std::int64_t> step;  // 0-based step it failed in
  // when it was written: ours (muster_time_ms), torchelastic's "timestamp" (seconds), else the
  // file's modification time (read_worker_error); 0 = not known
  store::epoch_ms time_ms = 0;
  bool time_in_seconds = false;  // time_ms from a whole second (torchelastic's "timestamp")
  // Whether it was written before `started_ms` (an earlier attempt's file): by the second where
  // its time is a whole second's; an unknown time is not.
  bool before(store::epoch_ms started_ms) const {
    return time_ms > 0 && time_ms + (time_in_seconds ? 999 : 0) < started_ms;
  }
};

// The file's JSON text.
std::string format_worker_error(const worker_error& e);

// What a file's text says: ours, torchelastic's own ({"message": {"message": ...}} or
// {"message": ...}), or any other text (its first 2000 bytes as the message).
worker_error parse_worker_error(std::string_view text);

// The error in `file`, or nothing when there is no such file.
std::optional<worker_error> read_worker_error(const std::filesystem::path& file);

}  // namespace muster

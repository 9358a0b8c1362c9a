// torchelastic's ChildFailedError, read from a log: the block torchrun prints when a worker
// fails, one entry per failed worker, the first observed failure under "Root Cause":
//
//   Failures:
//   [1]:
//     time      : 2026-11-22_03:12:44
//     host      : gpu-a07
//     rank      : 1 (local_rank: 1)
//     exitcode  : -9 (pid: 280967)
//     error_file: <N/A>
//     traceback : Signal 9 (SIGKILL) received by PID 280967
//   ------------------------------------------------------------
//   Root Cause (first observed failure):
//   [0]:
//     ...
//     error_file: /tmp/torchelastic_x/none_y/attempt_0/0/error.json
//     traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
//
// The entries span lines, so this is a small state machine fed the lines in order. Not here:
// what an entry means (diagnosis.cpp reads its error file and decides the category).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace muster::launcher::diagnose {

struct elastic_failure {
  bool root_cause = false;  // listed under "Root Cause (first observed failure)"
  std::optional<int> rank;  // the global rank
  std::string host;
  std::optional<int> exit_code;  // negative: killed by that signal
  std::string error_file;        // "" when torchelastic had none (<N/A>)
  std::string traceback;         // the entry's traceback line
  std::int64_t line = 0;         // the line that ended the entry (its traceback)
};

class elastic_failure_reader {
 public:
  // One line of a log, in order; the failure when the line ends an entry.
  std::optional<elastic_failure> add_line(std::int64_t number, std::string_view line);

  // The words of the lines add_line needs to see.
  static std::span<const std::string_view> keywords();

 private:
  enum class section { none, failures, root_cause };
  section section_ = section::none;
  std::optional<elastic_failure> entry_;
};

}  // namespace muster::launcher::diagnose

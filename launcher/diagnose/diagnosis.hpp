// From signals to a diagnosis: the findings of `muster diagnose`, each a category, whether it
// is the root cause or a knock-on effect, the ranks involved, evidence lines (file:line), what
// the lines say, and the fixes in the order to try them, naming the setting to change (muster's
// config key and the Megatron / torchrun / Slurm flag).
//
// Root and knock-on: the first failure in the logs' order that is not a collective timeout is
// the root, and the timeouts beside it are a cascade (nccl_timeout_cascade): the ranks that
// waited on the failed one time out in turn, and their lines may come first. A timeout with no
// failure before it is the root itself, and the ranks that did not report are the usual culprits.
// With nothing found, `unknown` carries the most suspicious lines.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "launcher/diagnose/log_signal.hpp"

namespace muster::launcher::diagnose {

struct evidence_line {
  std::string file;
  std::int64_t line = 0;
  std::string text;
};

struct finding {
  std::string category;
  bool root = false;
  std::set<int> ranks;
  std::vector<evidence_line> evidence;       // the first kMaxEvidence lines
  std::int64_t count = 0;                    // lines that said it
  std::map<std::string, std::string> facts;  // from the first line that said it
  std::string summary;                       // one line for people
  std::vector<std::string> fixes;            // in the order to try them
};

inline constexpr std::size_t kMaxEvidence = 5;

struct diagnosis {
  std::vector<finding> findings;          // the root first, then the knock-on effects in order
  std::vector<evidence_line> suspicious;  // with no finding: lines with error words, the last ones
  std::int64_t lines_read = 0;
  bool failed() const { return !findings.empty(); }
};

// Collects the lines of one or more logs, in order, in bounded memory.
class diagnoser {
 public:
  // `world_size` (0: unknown) lets a timeout name the ranks that did not report.
  explicit diagnoser(int world_size = 0) : world_size_(world_size) {}
  // One line of `file`; `file_rank` is the rank whose log the file is (its lines' rank when
  // they carry no prefix).
  void add_line(const std::string& file, std::int64_t number, std::string_view line,
                std::optional<int> file_rank = std::nullopt);
  // Lines read in all (a reader that skips lines without keywords() still counts them).
  void add_lines_read(std::int64_t lines) { lines_ += lines; }
  diagnosis finish() const;

  // The words of the lines add_line needs to see: the signals' and the error-looking ones that
  // `unknown` quotes. Every other line may be skipped.
  static std::span<const std::string_view> keywords();

 private:
  int world_size_;
  std::vector<finding> findings_;  // in the order first seen
  std::vector<evidence_line> suspicious_;
  std::int64_t lines_ = 0;
};

}  // namespace muster::launcher::diagnose

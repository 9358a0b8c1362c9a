// torchelastic's ChildFailedError, read from a log: see elastic_failures.hpp.
#include "launcher/diagnose/elastic_failures.hpp"

#include "launcher/diagnose/line_fields.hpp"

namespace muster::launcher::diagnose {
namespace {

// The value of field `key` ("  exitcode  : -9 (pid: 1)" -> "-9 (pid: 1)"), or nullopt when
// the line is not that field.
std::optional<std::string_view> field(std::string_view line, std::string_view key) {
  const auto at = line.find(key);
  // the field's name stands alone ("  host      : ..."), not inside a word ("localhost:29500")
  if (at == std::string_view::npos || (at > 0 && line[at - 1] != ' ' && line[at - 1] != '\t'))
    return std::nullopt;
  auto rest = line.substr(at + key.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() || rest.front() != ':') return std::nullopt;
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return rest;
}

}  // namespace

std::span<const std::string_view> elastic_failure_reader::keywords() {
  static constexpr std::string_view kWords[] = {"Root Cause (first observed failure)",
                                                "Failures:",
                                                "host      :",
                                                "rank      :",
                                                "exitcode  :",
                                                "error_file:",
                                                "traceback :"};
  return kWords;
}

std::optional<elastic_failure> elastic_failure_reader::add_line(std::int64_t number,
                                                                std::string_view line) {
  if (has(line, "Root Cause (first observed failure)")) {
    section_ = section::root_cause;
    entry_.reset();
    return std::nullopt;
  }
  if (has(line, "Failures:")) {
    section_ = section::failures;
    entry_.reset();
    return std::nullopt;
  }
  if (section_ == section::none) return std::nullopt;
  auto& e = entry_;
  if (auto host = field(line, "host")) {  // each entry begins with its time, then its host
    e = elastic_failure{};
    e->root_cause = section_ == section::root_cause;
    e->host = std::string(*host);
  } else if (!e) {
    return std::nullopt;
  } else if (auto rank = field(line, "rank")) {
    e->rank = number_at(*rank);
  } else if (auto code = field(line, "exitcode")) {
    e->exit_code = number_at(*code);
  } else if (auto file = field(line, "error_file")) {
    if (*file != "<N/A>") e->error_file = std::string(*file);
  } else if (auto traceback = field(line, "traceback")) {
    e->traceback = std::string(traceback->substr(0, 400));
    e->line = number;
    auto done = std::move(e);
    e.reset();
    if (section_ == section::root_cause) section_ = section::none;  // the block's last entry
    return done;
  }
  return std::nullopt;
}

}  // namespace muster::launcher::diagnose

// The per-step line between a worker and its launcher: see step_line.hpp.
#include "common/step_line.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace muster {
namespace {

std::optional<std::int64_t> integer(std::string_view text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> real(std::string_view text) {
  std::string s(text);  // strtod: from_chars for doubles is not in GCC 12's libstdc++ for "nan"
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

// The engine's metrics, written only when reported (not NaN).
template <class Record>
auto optional_keys(Record& s) {
  return std::array{std::pair{"aux_loss", &s.aux_loss},         std::pair{"z_loss", &s.z_loss},
                    std::pair{"grad_norm", &s.grad_norm},       std::pair{"lr", &s.lr},
                    std::pair{"tokens_per_s", &s.tokens_per_s}, std::pair{"mfu", &s.mfu},
                    std::pair{"comm_wait_s", &s.comm_wait_s}};
}

}  // namespace

std::string format_step_line(const store::step_record& s) {
  auto line = fmt::format("step={} loss={} tokens={} step_time_s={} mem_bytes={} time_ms={}",
                          s.step, s.loss, s.tokens, s.step_time_s, s.mem_bytes, s.time_ms);
  for (const auto& [key, value] : optional_keys(s))
    if (!std::isnan(*value)) line += fmt::format(" {}={}", key, *value);
  if (s.peak_mem_bytes > 0) line += fmt::format(" peak_mem_bytes={}", s.peak_mem_bytes);
  if (!s.mem_device.empty()) line += fmt::format(" mem_device={}", s.mem_device);
  return line + "\n";
}

std::optional<store::step_record> parse_step_line(std::string_view line) {
  if (line.empty() || line.back() != '\n') return std::nullopt;
  store::step_record s;
  bool has_step = false;
  std::istringstream words{std::string(line)};
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view key(word.data(), eq), value(word.data() + eq + 1, word.size() - eq - 1);
    if (key == "step") {
      auto v = integer(value);
      if (!v || *v < 0) return std::nullopt;
      s.step = *v;
      has_step = true;
    } else if (key == "loss") {
      s.loss = real(value).value_or(0);
    } else if (key == "tokens") {
      s.tokens = integer(value).value_or(0);
    } else if (key == "step_time_s") {
      s.step_time_s = real(value).value_or(0);
    } else if (key == "mem_bytes") {
      s.mem_bytes = integer(value).value_or(0);
    } else if (key == "time_ms") {
      s.time_ms = integer(value).value_or(0);
    } else if (key == "peak_mem_bytes") {
      s.peak_mem_bytes = integer(value).value_or(0);
    } else if (key == "mem_device") {
      s.mem_device = value;
    } else {
      for (const auto& [name, field] : optional_keys(s))
        if (key == name) *field = real(value).value_or(store::kNotReported);
    }
  }
  if (!has_step) return std::nullopt;
  return s;
}

std::vector<store::step_record> read_step_file(const std::filesystem::path& file) {
  std::vector<store::step_record> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // a line still being written has no newline yet
    if (auto step = parse_step_line(line + "\n")) out.push_back(*step);
  }
  return out;
}

}  // namespace muster

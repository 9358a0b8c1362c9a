// Reading workers' heartbeat files: see heartbeat.hpp.
#include "launcher/heartbeat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace muster::launcher {
namespace {

template <class T>
std::optional<T> number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A step count: a whole number, not negative.
std::optional<std::int64_t> count(std::string_view text) {
  auto n = number<std::int64_t>(text);
  return n && *n >= 0 ? n : std::nullopt;
}

}  // namespace

heartbeat_progress parse_heartbeat(std::string_view text) {
  heartbeat_progress p;
  const auto newline = text.find('\n');
  if (newline == std::string_view::npos) return p;  // nothing, or a write caught half done
  std::istringstream words{std::string(text.substr(0, newline))};
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view key(word.data(), eq), value(word.data() + eq + 1, word.size() - eq - 1);
    if (key == "step") p.step = count(value);
    else if (key == "steps") p.steps = count(value);
    else if (key == "loss") p.loss = number<double>(value);
    else if (key == "tokens_per_s") p.tokens_per_s = number<double>(value);
  }
  return p;
}

std::string format_heartbeat(const heartbeat_progress& p) {
  std::string line;
  auto add = [&line](const std::string& word) { line += (line.empty() ? "" : " ") + word; };
  if (p.step) add(fmt::format("step={}", *p.step));
  if (p.steps) add(fmt::format("steps={}", *p.steps));
  if (p.loss) add(fmt::format("loss={}", *p.loss));
  if (p.tokens_per_s) add(fmt::format("tokens_per_s={}", *p.tokens_per_s));
  return line + '\n';
}

std::optional<std::int64_t> heartbeat_age_ms(const std::filesystem::path& file) {
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(file, ec);
  if (ec) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::filesystem::file_time_type::clock::now() - written)
      .count();
}

std::optional<heartbeat> read_heartbeat(const std::filesystem::path& file) {
  auto age = heartbeat_age_ms(file);
  if (!age) return std::nullopt;
  heartbeat beat;
  beat.age_ms = *age;
  std::ifstream in(file);
  char text[4096];
  in.read(text, sizeof text);
  beat.progress = parse_heartbeat(std::string_view(text, static_cast<std::size_t>(in.gcount())));
  return beat;
}

std::string describe_heartbeats(
    const std::vector<std::pair<int, std::optional<heartbeat>>>& ranks) {
  std::string text;
  std::optional<std::int64_t> furthest;
  for (const auto& [rank, beat] : ranks) {
    text += fmt::format("{}rank {}: ", text.empty() ? "" : ", ", rank);
    if (!beat) {
      text += "never";
      continue;
    }
    if (beat->progress.step) {
      text += fmt::format("step {}, ", *beat->progress.step);
      furthest = std::max(furthest.value_or(*beat->progress.step), *beat->progress.step);
    }
    text += fmt::format("{} ms ago", beat->age_ms);
  }
  std::string behind;
  for (const auto& [rank, beat] : ranks)
    if (furthest && beat && beat->progress.step && *beat->progress.step < *furthest)
      behind += fmt::format("{}rank {} (step {} of {})", behind.empty() ? "" : ", ", rank,
                            *beat->progress.step, *furthest);
  return behind.empty() ? text : text + "; behind: " + behind;
}

}  // namespace muster::launcher

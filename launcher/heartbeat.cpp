// Reading workers' heartbeat files: see heartbeat.hpp.
#include "launcher/heartbeat.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>

namespace muster::launcher {

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
    if (furthest && beat && beat->progress.step && *furthest - *beat->progress.step >= kBehindSteps)
      behind += fmt::format("{}rank {} (step {} of {})", behind.empty() ? "" : ", ", rank,
                            *beat->progress.step, *furthest);
  return behind.empty() ? text : text + "; behind: " + behind;
}

namespace {

// The lowest and highest step of `hung`, when each of them reports one.
std::optional<std::pair<std::int64_t, std::int64_t>> step_range(
    const std::vector<std::pair<int, std::optional<heartbeat>>>& hung) {
  std::optional<std::pair<std::int64_t, std::int64_t>> range;
  for (const auto& [rank, beat] : hung) {
    if (!beat || !beat->progress.step) return std::nullopt;
    const auto step = *beat->progress.step;
    range = range ? std::pair{std::min(range->first, step), std::max(range->second, step)}
                  : std::pair{step, step};
  }
  return range;
}

}  // namespace

std::vector<int> hang_culprits(const std::vector<std::pair<int, std::optional<heartbeat>>>& hung) {
  std::vector<int> out;
  const auto range = step_range(hung);
  if (!range || range->first == range->second) return out;
  for (const auto& [rank, beat] : hung)
    if (*beat->progress.step == range->first) out.push_back(rank);
  return out;
}

std::string describe_hang_culprits(
    const std::vector<std::pair<int, std::optional<heartbeat>>>& hung) {
  const auto culprits = hang_culprits(hung);
  if (culprits.empty()) return "";
  const auto range = step_range(hung);
  return fmt::format("; waited on: rank {} (step {} of {})", fmt::join(culprits, ", "),
                     range->first, range->second);
}

}  // namespace muster::launcher

#include "launcher/launcher_lines.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "launcher/launch_policy.hpp"

namespace muster::launcher {

namespace {
constexpr std::string_view kNodeStart = "muster: node ";
constexpr std::string_view kStartsRanks = " starts rank";
}  // namespace

std::string node_start_line(int node, int num_nodes, const std::string& host, int first_rank,
                            int local_ranks, int world_size, const std::filesystem::path& run_dir) {
  const auto ranks = local_ranks == 1 ? fmt::format("{} {}", kStartsRanks, first_rank)
                                      : fmt::format("{}s {}-{}", kStartsRanks, first_rank,
                                                    first_rank + local_ranks - 1);
  return fmt::format("{}{} of {} ({}){} of {}; run directory {}", kNodeStart, node, num_nodes, host,
                     ranks, world_size, run_dir.string());
}

std::optional<bool> ran_builtin_engine(const std::vector<store::event_record>& events) {
  std::optional<bool> ran;
  for (const auto& e : events) {
    if (e.kind != "program") continue;
    ran = ran.value_or(false) || (e.message.starts_with(kProgramSaid) &&
                                  runs_builtin_engine({e.message.substr(kProgramSaid.size())}));
  }
  return ran;
}

std::string ended_early(std::int64_t rank, std::int64_t before_ms) {
  return fmt::format(
      "rank {}{}{:.1f} s before, with the others still running: a "
      "rank that leaves early makes its peers' next collective fail (data uneven across the "
      "ranks, or a loop that stops early on one rank)",
      rank, kEndedWell, static_cast<double>(before_ms) / 1000);
}

std::string hung_together(const std::vector<int>& ranks) {
  return fmt::format(
      "ranks {} were found hung at once, on the same step and none stopped: which one the "
      "others waited on is not known here (muster diagnose tells them apart by the stacks "
      "they dumped)",
      fmt::join(ranks, ", "));
}

std::optional<bool> ran_without_gpus(const std::vector<store::event_record>& events) {
  std::optional<bool> none;
  for (const auto& e : events)
    if (e.kind == "devices") none = none.value_or(true) && e.message == kNoGpuSaid;
  return none;
}

bool is_node_start_line(std::string_view line) {
  return line.starts_with(kNodeStart) && line.find(kStartsRanks) != std::string_view::npos;
}

std::optional<std::string> recorded_time_limit(const std::vector<store::event_record>& events) {
  std::optional<std::string> limit;
  for (const auto& e : events)
    if (e.kind == "time_limit" && e.message.starts_with(kTimeLimitSaid)) {
      const auto text = e.message.substr(kTimeLimitSaid.size());
      limit = text.substr(0, text.find(' '));
    }
  return limit;
}

std::vector<std::pair<store::epoch_ms, std::int64_t>> recorded_first_steps(
    const std::vector<store::event_record>& events) {
  std::vector<std::pair<store::epoch_ms, std::int64_t>> out;
  for (const auto& e : events)
    if (e.kind == "first_step" && e.message.starts_with(kFirstStepSaid))
      out.emplace_back(e.time_ms, std::atoll(e.message.c_str() + kFirstStepSaid.size()));
  return out;
}

}  // namespace muster::launcher

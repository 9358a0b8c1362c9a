// What musterd recorded of a job, for people: see node_job.hpp.
#include "launcher/cli/node_job.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

namespace muster::cli {
namespace {

using nlohmann::json;

// Epoch ms as local "2026-11-28 13:00:01"; "-" for none.
std::string clock_text(const json& ms) {
  if (!ms.is_number_integer()) return "-";
  const std::time_t t = static_cast<std::time_t>(ms.get<std::int64_t>() / 1000);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(t));
}

std::string text_of(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string node_job_text(const json& r) {
  std::string out;
  const auto& job = r.at("job");
  if (job.at("uid").is_number_integer())
    out += fmt::format("job       {}: uid {} ({})\n", text_of(job, "id"),
                       job.at("uid").get<std::int64_t>(),
                       text_of(job, "owner_from") == "slurm" ? "the owner Slurm reports"
                                                             : "who first recorded it");
  else
    out += fmt::format(
        "job       {}: no owner recorded (only root acted on it, or Slurm could "
        "not be asked)\n",
        text_of(job, "id"));
  for (const auto& s : r.at("steps")) {
    out += fmt::format("step {:<4} {:<9} {}  started {}, ended {}; {} rank(s), launcher pid {}\n",
                       text_of(s, "step"), text_of(s, "state"),
                       s.at("exit_code").is_number_integer()
                           ? fmt::format("exit {}", s.at("exit_code").get<std::int64_t>())
                           : std::string("-"),
                       clock_text(s.at("started_ms")), clock_text(s.at("ended_ms")),
                       s.at("num_ranks").get<std::int64_t>(), s.at("pid").get<std::int64_t>());
    if (const auto dir = text_of(s, "run_dir"); !dir.empty())
      out += fmt::format("          run {}\n", dir);
    if (const auto message = text_of(s, "message"); !message.empty())
      out += fmt::format("          {}\n", message);
  }
  for (const auto& p : r.at("preflights")) {
    const bool passed = p.at("passed").get<bool>();
    out += fmt::format("preflight {} step {}: {}\n", clock_text(p.at("time_ms")),
                       text_of(p, "step").empty() ? "-" : text_of(p, "step"),
                       passed ? "passed" : "FAILED");
    for (const auto& c : p.at("checks"))
      if (text_of(c, "status") == "fail")
        out += fmt::format("          fail {}: {}\n", text_of(c, "check"), text_of(c, "detail"));
  }
  for (const auto& d : r.at("decisions")) {
    const auto action = text_of(d, "action");
    const auto name = text_of(d, "name");
    out += fmt::format("decision  {} step {}: {} {}{} ({}): {}\n", clock_text(d.at("time_ms")),
                       text_of(d, "step"), action, name,
                       action == "set" || action == "setting" ? "=" + text_of(d, "value") : "",
                       text_of(d, "rule"), text_of(d, "reason"));
  }
  if (r.at("steps").empty() && r.at("preflights").empty() && r.at("decisions").empty())
    out += "          nothing recorded on this node\n";
  return out;
}

}  // namespace muster::cli

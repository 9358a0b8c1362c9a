// `muster diagnose [RUN] [--log FILE ...] [--world-size N] [--json]`: what failed first, why,
// on which ranks, and what to change (launcher/diagnose/). RUN is a run directory: its ranks'
// logs (logs/rank-N.log) are read; --log adds any other log (slurm-%j.out, torchrun, Megatron,
// dmesg). Every file is streamed in bounded memory.
// Exit 0 when no failure is found, 1 when one is diagnosed, 2 for bad input.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/diagnose/diagnosis.hpp"
#include "launcher/diagnose/log_reader.hpp"

namespace muster::cli {
namespace {

namespace fs = std::filesystem;
using namespace muster::launcher::diagnose;
using nlohmann::json;

struct diagnose_options {
  std::string run;
  std::vector<std::string> logs;
  int world_size = 0;
  bool json = false;
};

// The rank whose log `file` is ("rank-3.log" -> 3), if its name says so.
std::optional<int> rank_of_file(const fs::path& file) {
  const auto name = file.filename().string();
  if (!name.starts_with("rank-") || !name.ends_with(".log")) return std::nullopt;
  const auto digits = name.substr(5, name.size() - 9);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 6)
    return std::nullopt;
  return std::stoi(digits);
}

// The ranks' logs of a run directory, in rank order.
std::vector<fs::path> run_logs(const fs::path& run) {
  MUSTER_CHECK(fs::is_directory(run), errc::invalid_input,
               "diagnose: {} is not a run directory; give one (muster status lists them) or "
               "--log FILE",
               run.string());
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run / "logs", ec))
    if (rank_of_file(entry.path())) out.push_back(entry.path());
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return *rank_of_file(a) < *rank_of_file(b);
  });
  return out;
}

json evidence_json(const std::vector<evidence_line>& lines) {
  json out = json::array();
  for (const auto& e : lines) out.push_back({{"file", e.file}, {"line", e.line}, {"text", e.text}});
  return out;
}

json to_json(const diagnosis& d) {
  json findings = json::array();
  for (const auto& f : d.findings)
    findings.push_back({{"category", f.category},
                        {"root", f.root},
                        {"summary", f.summary},
                        {"ranks", f.ranks},
                        {"count", f.count},
                        {"facts", f.facts},
                        {"evidence", evidence_json(f.evidence)},
                        {"fixes", f.fixes}});
  json out = {{"failed", d.failed()}, {"lines_read", d.lines_read}, {"findings", findings}};
  if (!d.failed())
    out["unknown"] = {{"category", "unknown"}, {"suspicious", evidence_json(d.suspicious)}};
  return out;
}

void print_text(const diagnosis& d) {
  if (!d.failed()) {
    fmt::print("no failure found in {} lines\n", d.lines_read);
    if (!d.suspicious.empty()) {
      fmt::print("unknown: the most suspicious lines:\n");
      for (const auto& e : d.suspicious) fmt::print("  {}:{}: {}\n", e.file, e.line, e.text);
    }
    return;
  }
  for (const auto& f : d.findings) {
    fmt::print("{} [{}] {}\n", f.root ? "ROOT " : "then ", f.category, f.summary);
    for (const auto& e : f.evidence) fmt::print("    {}:{}: {}\n", e.file, e.line, e.text);
    if (f.count > static_cast<std::int64_t>(f.evidence.size()))
      fmt::print("    ... {} lines in all\n", f.count);
    for (std::size_t i = 0; i < f.fixes.size(); ++i)
      fmt::print("  fix {}: {}\n", i + 1, f.fixes[i]);
  }
}

int run_diagnose(const diagnose_options& o) {
  MUSTER_CHECK(!o.run.empty() || !o.logs.empty(), errc::invalid_input,
               "diagnose: nothing to read; give a run directory, or --log FILE");
  std::vector<std::pair<fs::path, std::optional<int>>> files;
  int ranks = 0;
  if (!o.run.empty())
    for (const auto& log : run_logs(o.run)) {
      files.emplace_back(log, rank_of_file(log));
      ++ranks;
    }
  for (const auto& log : o.logs) files.emplace_back(log, std::nullopt);
  diagnoser d(o.world_size > 0 ? o.world_size : ranks);
  for (const auto& [file, rank] : files) {
    const auto name = file.string();
    d.add_lines_read(read_log_lines(
        file,
        [&](std::int64_t number, std::string_view line) { d.add_line(name, number, line, rank); },
        diagnoser::keywords()));
  }
  const auto result = d.finish();
  if (o.json)
    fmt::print("{}\n", to_json(result).dump(2, ' ', false, json::error_handler_t::replace));
  else
    print_text(result);
  return result.failed() ? kExitFailure : kExitOk;
}

}  // namespace

void add_diagnose_verbs(CLI::App& app, verb_action& run) {
  auto o = std::make_shared<diagnose_options>();
  auto* cmd = app.add_subcommand(
      "diagnose", "what failed first, why, on which ranks, and what to change (exit 1: found)");
  cmd->add_option("run", o->run, "a run directory (its ranks' logs are read)");
  cmd->add_option("--log", o->logs, "another log: slurm-%j.out, torchrun, Megatron, dmesg")
      ->take_all();
  cmd->add_option("--world-size", o->world_size,
                  "the job's ranks, so a timeout names the ranks that did not report");
  cmd->add_flag("--json", o->json, "the findings as JSON (categories are stable ids)");
  cmd->callback([o, &run] { run = [o] { return run_diagnose(*o); }; });
}

}  // namespace muster::cli

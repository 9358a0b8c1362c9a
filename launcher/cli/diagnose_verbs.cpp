// `muster diagnose [RUN] [--log FILE ...] [--world-size N] [--json]`: what failed first, why,
// on which ranks and hosts, and what to change (launcher/diagnose/). RUN is a run id, a run
// directory or a Slurm job id (as `muster status` takes it): its store (errors, hangs, failed
// ranks, steps) and its ranks' logs (logs/rank-N.log) are read; --log adds any other log
// (slurm-%j.out, torchrun, Megatron, Ray, dmesg). Every file is streamed in bounded memory.
// Exit 0 when no failure is found (or the run succeeded after restarts), 1 when one is
// diagnosed, 2 for bad input.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_size.hpp"
#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/diagnose/run_diagnosis.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/run_recorder.hpp"
#include "launcher/status/run_status.hpp"
#include "launcher/status/slurm_jobs.hpp"
#include "launcher/status/status_output.hpp"

namespace muster::cli {
namespace {

namespace fs = std::filesystem;
using namespace muster::launcher::diagnose;
using nlohmann::json;

struct diagnose_options {
  std::string run;
  std::string runs_dir = "./muster-runs";
  std::vector<std::string> logs;
  int world_size = 0;
  bool json = false;
  bool keywords = false;
};

json evidence_json(const std::vector<evidence_line>& lines) {
  json out = json::array();
  for (const auto& e : lines) out.push_back({{"file", e.file}, {"line", e.line}, {"text", e.text}});
  return out;
}

json analysis_json(const rank_analysis& a) {
  json ranks = json::array();
  for (const auto& r : a.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"steps", r.steps},
                     {"median_step_s", r.median_step_s},
                     {"p90_step_s", r.p90_step_s},
                     {"median_busy_s", a.by_busy ? json(r.median_busy_s) : json()},
                     {"slower", r.slower},
                     {"straggler", r.straggler},
                     {"heartbeat_age_s", r.heartbeat_age_s ? json(*r.heartbeat_age_s) : json()},
                     {"peak_mem_bytes", r.peak_mem_bytes}});
  return {
      {"median_step_s", a.median_step_s},
      {"median_busy_s", a.by_busy ? json(a.median_busy_s) : json()},
      {"stragglers_by", a.by_busy ? "busy_time" : "step_time"},
      {"stragglers", a.stragglers},
      {"oldest_heartbeat_rank", a.oldest_heartbeat_rank ? json(*a.oldest_heartbeat_rank) : json()},
      {"oldest_heartbeat_age_s", a.oldest_heartbeat_rank ? json(a.oldest_heartbeat_age_s) : json()},
      {"peak_mem_bytes", a.peak_mem_bytes},
      {"peak_mem_rank", a.peak_mem_rank ? json(*a.peak_mem_rank) : json()},
      {"planned_mem_bytes", a.planned_mem_bytes},
      {"ranks", ranks}};
}

json to_json(const diagnosis& d, const std::optional<rank_analysis>& a) {
  json findings = json::array();
  for (const auto& f : d.findings)
    findings.push_back({{"category", f.category},
                        {"root", f.root},
                        {"summary", f.summary},
                        {"ranks", f.ranks},
                        {"hosts", f.hosts},
                        {"count", f.count},
                        {"facts", f.facts},
                        {"evidence", evidence_json(f.evidence)},
                        {"fixes", f.fixes}});
  json out = {{"failed", d.failed()}, {"lines_read", d.lines_read}, {"findings", findings}};
  if (d.stopped_as_asked)
    out["stopped_as_asked"] = {{"file", d.stopped_as_asked->file},
                               {"line", d.stopped_as_asked->line},
                               {"text", d.stopped_as_asked->text}};
  if (!d.failed())
    out["unknown"] = {{"category", "unknown"}, {"suspicious", evidence_json(d.suspicious)}};
  if (a) out["ranks"] = analysis_json(*a);
  return out;
}

void print_analysis(const rank_analysis& a) {
  if (a.median_step_s > 0) {
    fmt::print("ranks: median step time {:.3f} s", a.median_step_s);
    if (a.by_busy)
      fmt::print(", busy {:.3f} s (the step less its waits in collectives)", a.median_busy_s);
    const char* pace = a.by_busy ? "busier" : "slower";
    if (a.stragglers.empty()) {
      fmt::print("; no rank more than {:.0f}% {}\n", kStragglerSlowdown * 100, pace);
    } else {
      fmt::print("; stragglers (more than {:.0f}% {}):\n", kStragglerSlowdown * 100, pace);
      for (const auto& r : a.ranks)
        if (r.straggler)
          fmt::print(
              "  rank {} on {}: {} {:.3f} s (+{:.0f}%), step time median {:.3f} s, p90 "
              "{:.3f} s\n",
              r.rank, r.host, a.by_busy ? "busy" : "median",
              a.by_busy ? r.median_busy_s : r.median_step_s, r.slower * 100, r.median_step_s,
              r.p90_step_s);
    }
  }
  if (a.oldest_heartbeat_rank)
    fmt::print("oldest heartbeat of a running rank: rank {}, {:.1f} s ago\n",
               *a.oldest_heartbeat_rank, a.oldest_heartbeat_age_s);
  if (const auto memory = launcher::diagnose::memory_words(a); !memory.empty())
    fmt::print("memory: {}\n", memory);
}

// `succeeded`: the run store says the run ended well, so a stop its output shows was an earlier
// start's (a requeued job's slurm.out holds every start's lines).
void print_text(const diagnosis& d, bool succeeded) {
  if (!d.failed()) {
    fmt::print("no failure found in {} lines{}\n", d.lines_read,
               succeeded ? "; the run succeeded" : "");
    if (const auto& stop = d.stopped_as_asked; stop && !succeeded)
      fmt::print(
          "the job was stopped as asked (its workers ended on that stop's signal): "
          "{}:{}: {}\n",
          stop->file, stop->line, stop->text);
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
  if (o.keywords) {
    for (const auto word : diagnoser::keywords()) fmt::print("{}\n", word);
    return kExitOk;
  }
  fs::path run_dir;
  if (!o.run.empty()) {
    try {
      run_dir = launcher::status::find_run(o.run, o.runs_dir, /*storeless=*/true);
    } catch (const error& e) {
      // a Slurm job id with no run: pending (nothing to diagnose yet), or never started
      if (e.category() != errc::invalid_input ||
          o.run.find_first_not_of("0123456789_") != std::string::npos ||
          !launcher::status::array_task_runs(o.run, o.runs_dir).empty())
        throw;  // (an array's tasks: find_run's word names them)
      const auto job = launcher::status::job_without_run(o.run, o.runs_dir);
      if (!job) throw;
      fmt::print("nothing to diagnose yet: {}", launcher::status::job_text(*job, o.runs_dir));
      return kExitOk;
    }
  } else if (o.logs.empty()) {
    // neither a run nor a log: the newest run, as after `muster run` failed a moment ago
    const auto runs = launcher::status::list_runs(o.runs_dir);
    MUSTER_CHECK(!runs.empty(), errc::invalid_input,
                 "diagnose: no runs under {}; give a run (id, directory or Slurm job id), "
                 "--runs-dir where the runs are (launch.runs_dir), or --log FILE",
                 o.runs_dir);
    run_dir = runs.front().dir;
    fmt::print(stderr, "diagnosing the newest run under {}: {}\n", o.runs_dir,
               runs.front().run.run_id);
  }
  const auto d =
      diagnose_run(run_dir, std::vector<fs::path>(o.logs.begin(), o.logs.end()), o.world_size);
  const auto& result = d.result;
  const auto& analysis = d.analysis;
  // a run that launch.max_restarts brought to its end: what failed before is said, and is no
  // failure of the run
  const bool recovered = result.failed() && d.run && d.run->run &&
                         d.run->run->state == store::run_state::succeeded && d.run->restarts > 0;
  if (o.json) {
    auto out = to_json(result, analysis);
    if (recovered) out["recovered"] = true;
    if (d.newest_checkpoint) {
      out["newest_checkpoint"] = d.newest_checkpoint->string();
      out["checkpoint_before_run"] = d.checkpoint_before_run;
    }
    fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
  } else {
    if (recovered)
      fmt::print("the run succeeded after {} restart(s); what failed before:\n", d.run->restarts);
    const bool succeeded =
        d.run && d.run->run && d.run->run->state == store::run_state::succeeded;
    print_text(result, succeeded);
    const bool cancelled = d.run && d.run->run && d.run->run->state == store::run_state::cancelled;
    if (!result.failed() && !result.stopped_as_asked && cancelled)
      fmt::print("the run was stopped as asked: its store says cancelled\n");
    if (analysis) print_analysis(*analysis);
    // where a stopped or failed run goes on from: muster-train resumes from the newest
    // checkpoint under checkpoint.dir by itself
    // (not when the checkpoint itself is what failed to load)
    const bool checkpoint_failed =
        result.failed() && result.findings.front().category == "checkpoint_mismatch";
    if (d.newest_checkpoint && (result.failed() || result.stopped_as_asked || cancelled) &&
        !recovered && !succeeded && !checkpoint_failed) {
      const auto newest = fs::absolute(*d.newest_checkpoint).lexically_normal().string();
      fmt::print(
          "resume: {} {}; run the job again with checkpoint.load={} and muster-train goes on "
          "from there{}\n",
          d.checkpoint_before_run
              ? "this run saved no checkpoint; the newest under its checkpoint.dir, from an "
                "earlier run, is"
              : "its newest checkpoint is",
          newest, newest,
          d.checkpoint_dir_set
              ? " (without checkpoint.load it takes the newest under checkpoint.dir by itself, "
                "as a requeued job does)"
              : " (its checkpoint.dir is the run directory's, new for each muster run: a "
                "requeued Slurm job keeps it)");
    }
    // a requeue node 0 did not ask for, since it would train the same steps again
    for (const auto& e : d.events)
      if (e.kind == "requeue_refused") fmt::print("note: {}\n", e.message);
    // a rank that ended well long before the first failure (the launcher said so with it)
    for (const auto& e : d.events) {
      if (e.kind != "first_failure") continue;
      const auto text = std::string_view(e.message).substr(0, e.message.find(launcher::kLastOutput));
      const auto said = text.find(launcher::kEndedWell);
      if (said == std::string_view::npos) continue;
      const auto from = text.rfind("; rank ", said);
      if (from != std::string_view::npos)
        fmt::print("note: {}\n", text.substr(from + 2, text.find("; ", said) - from - 2));
    }
    // a run still going: what failed is not known yet, but a rank held stopped is
    if (d.run && d.run->run && d.run->run->state == store::run_state::running && !d.run->lost) {
      std::vector<std::int64_t> stopped;
      for (const auto& r : d.run->ranks)
        if (r.stopped_here) stopped.push_back(r.rank.rank);
      if (!stopped.empty())
        fmt::print(
            "note: rank {}'s process is stopped (SIGSTOP or a debugger holds it): the other ranks "
            "wait on it; kill -CONT it, or muster's hang detection stops the run after "
            "launch.timeout_hang\n",
            fmt::join(stopped, ", "));
      fmt::print("note: the run is still running (muster status {} follows it)\n",
                 d.run->run->run_id);
    }
    // ranks that were their own Slurm tasks wrote to the job's output, not to logs/
    if (d.run && d.run->one_task_per_rank && o.logs.empty() && !fs::exists(run_dir / "slurm.out"))
      fmt::print(
          "note: its ranks were their own Slurm tasks, whose output is the job's (srun's), not "
          "in {}/logs: give it with --log (e.g. --log slurm-{}.out)\n",
          run_dir.string(),
          d.run->run && d.run->run->slurm_job_id ? *d.run->run->slurm_job_id : "JOBID");
  }
  return result.failed() && !recovered ? kExitFailure : kExitOk;
}

}  // namespace

void add_diagnose_verbs(CLI::App& app, verb_action& run) {
  auto o = std::make_shared<diagnose_options>();
  auto* cmd = app.add_subcommand(
      "diagnose", "what failed first, why, on which ranks, and what to change (exit 1: found)");
  cmd->add_option("run", o->run,
                  "a run id (or its start), a run directory or a Slurm job id: its store and "
                  "its ranks' logs are read (default: the newest run, unless --log is given)");
  cmd->add_option("--runs-dir", o->runs_dir, "where the runs are (launch.runs_dir)")
      ->capture_default_str()
      ->envname("MUSTER_RUNS_DIR");
  cmd->add_option("--log", o->logs, "another log: slurm-%j.out, torchrun, Megatron, Ray, dmesg")
      ->take_all();
  cmd->add_option("--world-size", o->world_size,
                  "the job's ranks, so a timeout names the ranks that did not report (a run "
                  "knows its own)");
  cmd->add_flag("--json", o->json, "the findings as JSON (categories are stable ids)");
  cmd->add_flag("--keywords", o->keywords,
                "print the words a log line must hold to be read, one a line, and exit");
  cmd->callback([o, &run] { run = [o] { return run_diagnose(*o); }; });
  cmd->footer("example: muster diagnose tiny-moe --log slurm-4242.out");
}

}  // namespace muster::cli

// `muster report RUN [-o FILE] [--log FILE ...]`: one self-contained HTML page of a run
// (launcher/report/html_report.hpp): the diagnosis, loss, throughput, step time per rank,
// memory, layout and events. RUN is a run id, a run directory or a Slurm job id; --log adds
// logs to the diagnosis as `muster diagnose` does. The page is written beside, then renamed
// into place, so a reader never sees half of it.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/diagnose/run_diagnosis.hpp"
#include "launcher/report/html_report.hpp"
#include "launcher/status/run_status.hpp"

namespace muster::cli {
namespace {

namespace fs = std::filesystem;

struct report_options {
  std::string run;
  std::string runs_dir = "./muster-runs";
  std::string output = "report.html";
  std::vector<std::string> logs;
};

int write_report(const report_options& o) {
  const auto dir = launcher::status::find_run(o.run, o.runs_dir);
  const auto d =
      launcher::diagnose::diagnose_run(dir, std::vector<fs::path>(o.logs.begin(), o.logs.end()), 0);
  MUSTER_CHECK(d.run.has_value(), errc::invalid_input,
               "report: {} has no run store (node-*.db): a report needs the steps a launcher "
               "recorded; for logs alone use muster diagnose --log",
               dir.string());
  const auto page = launcher::report::html_report(d, store::now_ms());
  const fs::path out = o.output;
  const fs::path temp = out.string() + ".partial";
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file << page;
    file.close();
    if (!file.good()) {
      const int e = errno;
      std::error_code ignored;
      fs::remove(temp, ignored);
      MUSTER_THROW(errc::io, "report: cannot write {}: {}; give another -o path", temp.string(),
                   e != 0 ? std::strerror(e) : "the write failed");
    }
  }
  std::error_code ec;
  fs::rename(temp, out, ec);
  MUSTER_CHECK(!ec, errc::io, "report: cannot rename {} to {}: {}", temp.string(), out.string(),
               ec.message());
  fmt::print("{} ({} KiB): {}\n", out.string(), page.size() / 1024,
             d.result.failed() ? "root cause " + d.result.findings.front().category
                               : std::string("no failure found"));
  return kExitOk;
}

}  // namespace

void add_report_verbs(CLI::App& app, verb_action& run) {
  auto o = std::make_shared<report_options>();
  auto* cmd = app.add_subcommand(
      "report",
      "one self-contained HTML page of a run: diagnosis, loss, tokens/s, step time "
      "per rank (stragglers), memory, layout, events");
  cmd->add_option("run", o->run, "a run id (or its start), a run directory or a Slurm job id")
      ->required();
  cmd->add_option("-o,--output", o->output, "the HTML file to write")->capture_default_str();
  cmd->add_option("--runs-dir", o->runs_dir, "where the runs are (launch.runs_dir)")
      ->capture_default_str()
      ->envname("MUSTER_RUNS_DIR");
  cmd->add_option("--log", o->logs, "another log for the diagnosis: slurm-%j.out, dmesg, ...")
      ->take_all();
  cmd->callback([o, &run] { run = [o] { return write_report(*o); }; });
  cmd->footer("example: muster report tiny-moe -o report.html && xdg-open report.html");
}

}  // namespace muster::cli

// `muster`: the launcher's command line. main() only wires the verbs together and turns
// errors into one clear line on stderr and a documented exit code (see verbs.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/cli/verbs.hpp"
#include "muster/version.hpp"

int main(int argc, char** argv) {
  using namespace muster::cli;
  CLI::App app{
      "muster: Slurm-native launcher for Mixture-of-Experts training\n"
      "exit codes: 0 success, 1 the work failed, 2 bad input (command line, config, "
      "hostlist, environment), 3 a valid plan that does not fit the GPU (plan)",
      "muster"};
  app.set_version_flag("--version",
                       fmt::format("muster {} (git {})", muster::kVersion, muster::kGitCommit));
  app.require_subcommand(1);
  // Everything after the first "--" is the workers' command (muster run ... -- python3 x.py):
  // split off here so CLI11 never reads the program's own options.
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      command.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  verb_action run;
  add_hostlist_verbs(app, run);
  add_config_verbs(app, run);
  add_slurm_verbs(app, run);
  add_plan_verbs(app, run);
  add_status_verbs(app, run);
  add_node_verbs(app, run);
  add_diagnose_verbs(app, run);
  add_report_verbs(app, run);
  add_run_verbs(app, run, command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (!command.empty() && !app.got_subcommand("run") && !app.got_subcommand("launch")) {
    fmt::print(stderr, "muster: only `muster run` and `muster launch` take a program after --\n");
    return kExitUsage;
  }
  try {
    muster::log::setup();  // MUSTER_LOG_LEVEL; verbs that load a job file apply its log.level
    return run ? run() : kExitOk;
  } catch (const muster::error& e) {
    fmt::print(stderr, "muster: {}\n", e.what());
    bool bad_input = e.category() == muster::errc::invalid_input ||
                     e.category() == muster::errc::config ||
                     e.category() == muster::errc::environment;
    return bad_input ? kExitUsage : kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "muster: {}\n", e.what());
    return kExitFailure;
  }
}

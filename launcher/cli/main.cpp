// `muster`: the launcher's command line. main() only wires the verbs together and turns
// errors into one clear line on stderr and a documented exit code (see verbs.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_schema.hpp"
#include "common/error.hpp"
#include "common/job_config.hpp"
#include "common/job_other_names.hpp"
#include "common/log.hpp"
#include "launcher/cli/verbs.hpp"
#include "muster/version.hpp"

namespace {

// Whether job key `key` is a bool (a switch on other tools' command lines).
bool is_bool_key(const std::string& key) {
  muster::job_config c;
  for (const auto& f : muster::config::bind_fields(c, muster::job_config_schema()))
    if (f.key == key) return std::holds_alternative<bool*>(f.value);
  return false;
}

// A torchrun or Megatron option given to muster itself ("--nproc-per-node 4"), said as the job
// key muster takes it as; nothing for any other argument. Only the arguments before "--".
std::optional<std::string> other_tools_option(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) continue;
    const auto eq = arg.find('=');
    std::string name(arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2));
    std::replace(name.begin(), name.end(), '_', '-');
    for (const auto& o : muster::job_other_names()) {
      if (o.name != name) continue;
      // a switch (its key a bool) takes no value: the next argument is not its
      const std::string key(o.key.substr(0, o.key.find_first_of(" =")));
      const bool flag = is_bool_key(key);
      const std::string value = eq != std::string_view::npos ? std::string(arg.substr(eq + 1))
                                : flag                       ? "true"
                                : i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("-")
                                    ? argv[i + 1]
                                    : "...";
      // "parallel.sharding = \"optim\"", "comm.timeout (in seconds)": as the table says it
      const auto write = o.key.find_first_of(" =") != std::string_view::npos
                             ? std::string(o.key)
                             : fmt::format("{}={}", o.key, value);
      return fmt::format(
          "{} is {}'s option; muster takes it from the job: give {} after the job file (or set "
          "it in the job file's [{}] section); muster config --reference lists every key",
          arg.substr(0, eq), o.tool, write, key.substr(0, key.find('.')));
    }
  }
  return std::nullopt;
}

}  // namespace

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
  bool dash_dash = false;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      command.assign(argv + i + 1, argv + argc);
      argc = i;
      dash_dash = true;
      break;
    }
  if (const auto theirs = other_tools_option(argc, argv)) {
    fmt::print(stderr, "muster: {}\n", *theirs);
    return kExitUsage;
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
  if (dash_dash && command.empty()) {
    fmt::print(stderr,
               "muster: nothing after --: put the program there (muster run job.toml -- python3 "
               "train.py), or leave -- out to run muster-train\n");
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

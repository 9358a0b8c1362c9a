// `muster`: the launcher's command line. main() only wires the verbs together and turns
// errors into one clear line on stderr and a documented exit code (see verbs.hpp).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
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

// The long option names of `app` and all its subcommands ("nodes", "runs-dir").
std::set<std::string> known_options(const CLI::App& app) {
  std::set<std::string> out;
  for (const auto* option : app.get_options())
    for (const auto& name : option->get_lnames()) out.insert(name);
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    out.merge(known_options(*sub));
  return out;
}

// The job's field for `key`, or nothing.
std::optional<muster::config::value_ptr> field_of(muster::job_config& c, std::string_view key) {
  for (const auto& f : muster::config::bind_fields(c, muster::job_config_schema()))
    if (f.key == key) return f.value;
  return std::nullopt;
}

// An override of `key` to another tool's `value`, as a shell word muster takes: lists as TOML
// arrays, quoted for the shell.
std::string override_of(std::string_view key, const std::string& value) {
  muster::job_config c;
  const auto field = field_of(c, key);
  if (field && std::holds_alternative<std::vector<std::string>*>(*field))
    return fmt::format("'{}=[\"{}\"]'", key, value);
  return fmt::format("{}={}", key, value);
}

// A torchrun or Megatron option given to muster itself ("--nproc-per-node 4"), said as the job
// key muster takes it as; nothing for any other argument. Only the arguments before "--". Names
// in job_other_names(), and options named as a job key is ("--global-batch-size":
// train.global_batch_size).
std::optional<std::string> other_tools_option(int argc, char** argv,
                                              const std::set<std::string>& own) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) continue;
    const auto eq = arg.find('=');
    std::string name(arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2));
    if (own.contains(name)) continue;  // muster's own --nodes, --runs-dir, ...
    std::replace(name.begin(), name.end(), '_', '-');
    std::string key, tool, write;
    for (const auto& o : muster::job_other_names())
      if (o.name == name) {
        key = std::string(o.key.substr(0, o.key.find_first_of(" =")));
        tool = std::string(o.tool) + "'s";
        write = std::string(o.key);
      }
    if (key.empty()) {  // a key's own name, with dashes
      std::string underscored = name;
      std::replace(underscored.begin(), underscored.end(), '-', '_');
      for (const auto& f : muster::job_config_schema())
        if (f.key.substr(f.key.find('.') + 1) == underscored) {
          key = std::string(f.key);
          tool = "another tool's";
        }
    }
    if (key.empty()) continue;
    muster::job_config c;
    const auto field = field_of(c, key);
    const bool flag = field && std::holds_alternative<bool*>(*field);
    // a switch takes no value: the next argument is not its
    std::string value = eq != std::string_view::npos ? std::string(arg.substr(eq + 1))
                        : flag                       ? "true"
                        : i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("-")
                            ? argv[i + 1]
                            : "...";
    if (write.find(" = ") != std::string::npos) {
      // "parallel.sharding = \"optim\"": as one shell word muster takes
      auto set = write.substr(write.find(" = ") + 3);
      if (set.size() >= 2 && set.front() == '"' && set.back() == '"')
        set = set.substr(1, set.size() - 2);
      write = key + "=" + set;
    } else if (key == "comm.timeout" && name == "distributed-timeout-minutes") {
      const bool number = !value.empty() && value.find_first_not_of("0123456789") == value.npos;
      write = number ? fmt::format("comm.timeout={}", std::stoll(value) * 60)
                     : "comm.timeout=<seconds>";
    } else if (key == "launch.nproc" && (value == "gpu" || value == "auto")) {
      write = "launch.nproc=0";  // one rank a GPU
    } else {
      write = override_of(key, value);
    }
    const std::string note =
        key == "slurm.nodes"
            ? " (muster-sbatch's --nodes; under srun and muster run, Slurm's allocation or this "
              "one machine decides)"
        : key == "data.paths" ? " (with data.format=indexed for Megatron's .bin/.idx prefixes)"
                              : "";
    return fmt::format(
        "{} is {} option; muster takes it from the job: give {} after the job file{} (or set "
        "it in the job file's [{}] section); muster config --reference lists every key",
        arg.substr(0, eq), tool, write, note, key.substr(0, key.find('.')));
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
    // an option muster has not, that another tool has: said as the job key it is here
    if (const auto theirs = other_tools_option(argc, argv, known_options(app));
        theirs && e.get_exit_code() != 0) {
      fmt::print(stderr, "muster: {}\n", *theirs);
      return kExitUsage;
    }
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

// The verbs of the `muster` CLI. Each add_*_verbs function registers its subcommands on the
// CLI11 app; the verb the user picks stores its action in `run`, which main() calls after
// parsing. Actions return an exit code or throw muster::error (main maps the category).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::cli {

// Exit codes of every muster binary.
inline constexpr int kExitOk = 0;  // success
inline constexpr int kExitFailure =
    1;                                // the work itself failed (a rank died, a file is unwritable)
inline constexpr int kExitUsage = 2;  // bad input: command line, config, hostlist, environment
inline constexpr int kExitNoFit = 3;  // `muster plan`: a valid plan that does not fit the GPU

using verb_action = std::function<int()>;

// A verb's positional arguments: at most one job file, and section.key=value overrides.
struct job_args {
  std::string file;  // "" = none given
  std::vector<std::string> overrides;
};
// Splits `args`; two job files throw errc::invalid_input
// "<verb>: two job files given (A and B); <fix>", where `fix` may name B with "{}".
job_args split_job_args(const std::vector<std::string>& args, std::string_view verb,
                        std::string_view fix);

void add_hostlist_verbs(CLI::App& app, verb_action& run);  // hostnames, hostlist
void add_config_verbs(CLI::App& app, verb_action& run);    // config
void add_slurm_verbs(CLI::App& app, verb_action& run);     // slurm-step
void add_plan_verbs(CLI::App& app, verb_action& run);      // plan
void add_status_verbs(CLI::App& app, verb_action& run);    // status
void add_node_verbs(CLI::App& app, verb_action& run);      // node status, env, preflight
void add_diagnose_verbs(CLI::App& app, verb_action& run);  // diagnose
void add_report_verbs(CLI::App& app, verb_action& run);    // report
// run; `command` is what followed "--" on the command line (main splits it off).
void add_run_verbs(CLI::App& app, verb_action& run, const std::vector<std::string>& command);
}  // namespace muster::cli

// `muster config`: load a job file with overrides, validate it and print the resolved config,
// or print every key with its default (`--defaults`, a starting point for a new job file), or
// the reference of every key as Markdown (`--reference`, docs/job-file.md).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/job_config.hpp"
#include "launcher/cli/verbs.hpp"

namespace muster::cli {

void add_config_verbs(CLI::App& app, verb_action& run) {
  struct options {
    std::vector<std::string> args;
    bool defaults = false;
    bool reference = false;
    bool docs = false;
  };
  auto opts = std::make_shared<options>();
  auto* verb = app.add_subcommand(
      "config",
      "validate a job file and print the resolved config (file, then key=value overrides)");
  verb->add_option("args", opts->args, "JOB.toml and/or section.key=value overrides");
  verb->add_flag("--defaults", opts->defaults, "print every key with its default and its doc");
  verb->add_flag("--docs", opts->docs, "print each key's doc as a comment");
  verb->add_flag("--reference", opts->reference,
                 "print every key with its type, default and doc as Markdown tables "
                 "(docs/job-file.md)");
  verb->callback([opts, &run] {
    run = [opts] {
      auto [file, overrides] =
          split_job_args(opts->args, "config", "give one, then key=value overrides");
      if (opts->reference) {
        MUSTER_CHECK(opts->args.empty() && !opts->defaults, errc::invalid_input,
                     "config --reference takes no job file, overrides or --defaults");
        fmt::print("{}", job_config_reference());
        return kExitOk;
      }
      if (opts->defaults) {
        MUSTER_CHECK(opts->args.empty(), errc::invalid_input,
                     "config --defaults takes no job file or overrides");
        fmt::print("{}", to_toml(job_config{}, true));
        return kExitOk;
      }
      auto loaded = load_job_config(file, overrides);
      fmt::print("{}", to_toml(loaded.config, opts->docs));
      return kExitOk;
    };
  });
}

}  // namespace muster::cli

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

namespace {

// With train.global_batch_size set, the grad_accum_steps printed is not the one used: the plan
// derives it from the world's data-parallel size, which a job file alone does not give.
std::string with_derived_note(std::string toml, const job_config& config) {
  if (config.train.global_batch_size <= 0) return toml;
  const auto key = fmt::format("\ngrad_accum_steps = {}\n", config.train.grad_accum_steps);
  if (const auto at = toml.find(key); at != std::string::npos)
    toml.insert(at + key.size() - 1,
                "  # derived from global_batch_size on the job's world (muster plan "
                "prints it)");
  return toml;
}

}  // namespace

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
      fmt::print("{}", with_derived_note(to_toml(loaded.config, opts->docs), loaded.config));
      return kExitOk;
    };
  });
}

}  // namespace muster::cli

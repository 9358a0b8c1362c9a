// `muster config`: load a job file with overrides, validate it and print the resolved config
// (or one key's value, `--get`, and where each value came from, `--origin`), or print every key
// with its default (`--defaults`, a starting point for a new job file), or the reference of every
// key as Markdown (`--reference`, docs/job-file.md).
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/env_knobs.hpp"
#include "common/error.hpp"
#include "common/job_config.hpp"
#include "common/log.hpp"
#include "launcher/cli/verbs.hpp"

namespace muster::cli {

namespace {

// With train.global_batch_size set, the grad_accum_steps printed is not the one used: the plan
// derives it from the world's data-parallel size, which a job file alone does not give.
constexpr std::string_view kDerivedNote =
    "derived from global_batch_size on the job's world (muster plan prints it)";

}  // namespace

void add_config_verbs(CLI::App& app, verb_action& run) {
  struct options {
    std::vector<std::string> args;
    bool defaults = false;
    bool reference = false;
    bool docs = false;
    bool origin = false;
    std::vector<std::string> get;
  };
  auto opts = std::make_shared<options>();
  auto* verb = app.add_subcommand(
      "config",
      "validate a job file and print the resolved config (file, then key=value overrides)");
  verb->add_option("args", opts->args, "JOB.toml and/or section.key=value overrides");
  verb->add_flag("--defaults", opts->defaults, "print every key with its default and its doc");
  verb->add_flag("--docs", opts->docs, "print each key's doc as a comment");
  verb->add_option("--get", opts->get,
                   "print only this key's value (a string bare, for scripts), or a section's "
                   "keys; several: --get a,b or --get a --get b, one line each")
      ->type_name("KEY[,KEY...]")
      ->delimiter(',')
      ->allow_extra_args(false);
  verb->add_flag("--origin", opts->origin,
                 "say after each key where its value came from: the job file's line, the "
                 "command line, or the default");
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
      MUSTER_CHECK(opts->get.empty() || !opts->docs, errc::invalid_input,
                   "config --get prints values alone; leave out --docs (muster config --docs "
                   "prints every key with its doc)");
      auto loaded = load_job_config(file, overrides);
      // the level the programs log at: MUSTER_LOG_LEVEL wins over log.level (common/log.hpp)
      spdlog::level::level_enum level{};
      if (const auto env = env_value(kEnvLogLevel); env && log::parse_level(*env, level)) {
        loaded.config.log.level = *env;
        loaded.where["log.level"] =
            fmt::format("{}={} in the environment, which wins", kEnvLogLevel, *env);
      }
      const auto* origins = opts->origin ? &loaded.where : nullptr;
      if (opts->get.empty()) {
        fmt::print("{}", with_grad_accum_note(to_toml(loaded.config, opts->docs, origins),
                                              loaded.config, kDerivedNote));
        return kExitOk;
      }
      // "a, b" as well as "a,b"
      for (auto& key : opts->get) {
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
      }
      std::string out;  // every key checked before anything is printed
      for (const auto& key : opts->get) out += value_text(loaded.config, key, origins);
      fmt::print("{}", out);
      for (const auto& key : opts->get)
        if (loaded.config.train.global_batch_size > 0 &&
            (key == "train.grad_accum_steps" || key == "train"))
          fmt::print(stderr, "muster: config: train.grad_accum_steps is {}\n", kDerivedNote);
      return kExitOk;
    };
  });
}

}  // namespace muster::cli

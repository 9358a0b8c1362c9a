// `muster run JOB.toml [key=value ...] [-- COMMAND ARGS...]`: the job on this machine,
// launch.nproc ranks (one per GPU, or 2 without GPUs), torchrun's contract for the workers.
// `muster launch JOB.toml [key=value ...] [-- COMMAND ARGS...]`: the same across the nodes of
// a Slurm step, run by `srun --ntasks-per-node=1` (or one task per rank).
// Without COMMAND they run the built-in engine, muster-train, installed beside this binary. Exit status: the first failing rank's exit code (128 + signal
// when a signal ended it), 0 when every rank succeeded, 2 for bad input.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/local_run.hpp"
#include "launcher/slurm_launch.hpp"

namespace muster::cli {
namespace {

// This program's directory, where the default worker is installed beside it.
std::filesystem::path own_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(".") : self.parent_path();
}

// Registers `verb`: its args (JOB.toml and overrides) and the command after -- become a
// job_request that `start` runs when the verb is chosen.
CLI::App* add_job_verb(CLI::App& app, verb_action& run, const std::vector<std::string>& command,
                       const std::string& verb, const std::string& help,
                       int (*start)(const launcher::job_request&)) {
  auto args = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand(verb, help);
  sub->add_option("args", *args, "JOB.toml and/or section.key=value overrides");
  sub->callback([=, &run, &command] {
    run = [=, &command] {
      auto split = split_job_args(
          *args, verb, "put the program after --, e.g. muster " + verb + " job.toml -- {}");
      // a program where the job file goes (muster run train.py): said before its "TOML" is read
      if (const auto ext = std::filesystem::path(split.file).extension();
          ext == ".py" || ext == ".sh" || ext == ".bash")
        MUSTER_THROW(errc::invalid_input,
                     "{} is a program, not a job file: put it after --, e.g. muster {} job.toml "
                     "-- python3 {} (or muster {} -- python3 {} with every key at its default)",
                     split.file, verb, split.file, verb, split.file);
      if (split.file.empty() && command.empty())  // easy to do by mistake: say what runs
        fmt::print(stderr,
                   "muster {}: no job file and no program after --: muster-train on the default "
                   "job (every key at its default, as etc/examples/job.toml lists them); give "
                   "one, e.g. muster {} tiny-moe.toml\n",
                   verb, verb);
      launcher::job_request request;
      request.job_file = split.file;
      request.overrides = std::move(split.overrides);
      request.command = command;
      request.default_worker = own_dir() / "muster-train";
      return start(request);
    };
  });
  return sub;
}

int start_local(const launcher::job_request& request) {
  return launcher::run_local(request).exit_code;
}

}  // namespace

void add_run_verbs(CLI::App& app, verb_action& run, const std::vector<std::string>& command) {
  add_job_verb(app, run, command, "run",
               "run a job on this machine: launch.nproc ranks with torchrun's environment, fail "
               "fast, logs and the run store in launch.runs_dir; put the program after --",
               start_local)
      ->footer("example: muster run job.toml launch.nproc=4 -- python3 train.py --lr 3e-4");
  add_job_verb(app, run, command, "launch",
               "run a job across the nodes of a Slurm step (srun --ntasks-per-node=1 muster "
               "launch job.toml): plan, rendezvous through node 0, start this node's ranks, fail "
               "fast across nodes; with one srun task per rank each task execs its worker",
               launcher::run_slurm_launch)
      ->footer(
          "example: srun --ntasks-per-node=1 muster launch job.toml -- python3 train.py\n"
          "the run directory is <launch.runs_dir>/<job.name>-<SLURM_JOB_ID>, shared by every "
          "node and by a requeued job");
}

}  // namespace muster::cli

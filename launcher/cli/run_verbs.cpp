// `muster run JOB.toml [key=value ...] [-- COMMAND ARGS...]`: the job on this machine,
// launch.nproc ranks (one per GPU, or 2 without GPUs), torchrun's contract for the workers.
// `muster launch JOB.toml [key=value ...] [-- COMMAND ARGS...]`: the same across the nodes of
// a Slurm step, run by `srun --ntasks-per-node=1` (or one task per rank).
// Without COMMAND they run the built-in worker (muster-test-worker beside this binary until the
// engine, muster-train, exists). Exit status: the first failing rank's exit code (128 + signal
// when a signal ended it), 0 when every rank succeeded, 2 for bad input.
#include <unistd.h>

#include <filesystem>

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

}  // namespace

void add_run_verbs(CLI::App& app, verb_action& run, const std::vector<std::string>& command) {
  struct options {
    std::vector<std::string> args;
  };
  auto o = std::make_shared<options>();
  auto* verb = app.add_subcommand(
      "run",
      "run a job on this machine: launch.nproc ranks with torchrun's environment, fail fast, "
      "logs and the run store in launch.runs_dir; put the program after --");
  verb->add_option("args", o->args, "JOB.toml and/or section.key=value overrides");
  verb->footer("example: muster run job.toml launch.nproc=4 -- python3 train.py --lr 3e-4");
  verb->callback([o, &run, &command] {
    run = [o, &command] {
      launcher::local_run_request request;
      auto args = split_job_args(o->args, "run",
                                 "put the program after --, e.g. muster run job.toml -- {}");
      request.job_file = args.file;
      request.overrides = std::move(args.overrides);
      request.command = command;
      request.default_worker = own_dir() / "muster-test-worker";
      return launcher::run_local(request).exit_code;
    };
  });

  auto l = std::make_shared<options>();
  auto* launch = app.add_subcommand(
      "launch",
      "run a job across the nodes of a Slurm step (srun --ntasks-per-node=1 muster launch "
      "job.toml): plan, rendezvous through node 0, start this node's ranks, fail fast across "
      "nodes; with one srun task per rank each task execs its worker");
  launch->add_option("args", l->args, "JOB.toml and/or section.key=value overrides");
  launch->footer(
      "example: srun --ntasks-per-node=1 muster launch job.toml -- python3 train.py\n"
      "the run directory is <launch.runs_dir>/<job.name>-<SLURM_JOB_ID>, shared by every node "
      "and by a requeued job");
  launch->callback([l, &run, &command] {
    run = [l, &command] {
      launcher::slurm_launch_request request;
      auto args = split_job_args(l->args, "launch",
                                 "put the program after --, e.g. muster launch job.toml -- {}");
      request.job_file = args.file;
      request.overrides = std::move(args.overrides);
      request.command = command;
      request.default_worker = own_dir() / "muster-test-worker";
      return launcher::run_slurm_launch(request);
    };
  });
}

}  // namespace muster::cli

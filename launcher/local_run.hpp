// `muster run`: one job on this machine. Plans the layout (launcher/plan), creates the run
// directory with its job.toml, logs/ and this node's run-store file, starts launch.nproc ranks
// with the torchrun contract (worker_env.hpp), supervises them (supervisor.hpp), and records
// every rank's start and end, the first failure and its knock-ons, and forwarded signals.
// Not here: Slurm (`muster launch`), the multi-node rendezvous.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/job_config.hpp"
#include "common/run_dir.hpp"
#include "launcher/plan/batch_plan.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::launcher {

// What `muster run` and `muster launch` are asked to run.
struct job_request {
  std::filesystem::path job_file;            // "" = defaults
  std::vector<std::string> overrides;        // section.key=value
  std::vector<std::string> command;          // empty: the built-in worker
  std::filesystem::path default_worker;      // the program run without a command
  int console_fd = 1;                        // the [rank N] console view
};

struct local_run_result {
  int exit_code = 0;                         // the first failure's, see supervise_result
  std::filesystem::path run_dir;
};

// This machine's name up to the first '.', as Slurm names nodes.
std::string short_hostname();
// Writes the resolved job file to <run_dir>/job.toml, with the grad_accum_steps `batch` takes
// where global_batch_size derives them; throws errc::io naming it.
void write_job_file(const store::run_paths& paths, const job_config& config,
                    const plan::batch_plan& batch);
// The workers' argv: `command`, or the default worker; argv[0] is checked to be a program on
// PATH (errc::invalid_input naming it) before anything is written.
std::vector<std::string> worker_argv(const std::vector<std::string>& command,
                                     const std::filesystem::path& default_worker,
                                     const env_map& env);

// Runs the job to its end. Throws errc::config / invalid_input for bad input (nothing started),
// errc::io / errc::store when the run directory or its store cannot be written.
local_run_result run_local(const job_request& request);

}  // namespace muster::launcher

// The batch script muster-sbatch submits for a job file: #SBATCH lines from the [slurm]
// section (nodes, GPUs per node, time, partition, account, the pre-timeout USR1, requeue, the
// output file), then one `muster launch` task per node through srun, run in the background
// while the batch shell waits, so the shell's trap passes Slurm's USR1 on at once (bash runs a
// trap only between foreground commands).
//
// Slurm's output goes to <runs_dir>/slurm-<job id>.out (Slurm creates no directories, and the
// run directory is named after the job id, which is known only once the job runs); the script
// links it into the run directory as slurm.out, where `muster diagnose` reads it.
// Every word that comes from the user is single-quoted for the batch shell.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_config.hpp"

namespace muster::slurm {

struct batch_request {
  std::filesystem::path job_file;      // absolute
  std::vector<std::string> overrides;  // key=value for muster launch, as given
  // key=value for the job's relative paths made absolute from where muster-sbatch ran
  // (made_absolute_overrides), after `overrides`
  std::vector<std::string> absolute_paths;
  std::vector<std::string> command;    // the worker command after `--`; empty: the engine
  std::filesystem::path runs_dir;      // absolute
  std::filesystem::path muster;        // the muster binary, absolute
  // sbatch's --output the user gave (it wins over the script's), absolute; empty: the script's
  // <runs_dir>/slurm-%j.out
  std::string output;
  std::string job_name;  // sbatch's --job-name the user gave, for its %x; empty: job.name
  // sbatch's --cpus-per-task the user gave (srun of Slurm 22.05 to 23.02 takes it from no job:
  // said to srun too); empty: slurm.cpus_per_task's
  std::string cpus_per_task;
};

// sbatch's --output filename pattern as a shell word that names the file from inside the job
// (%j, %x, %A, %a, %u and %% as Slurm fills them in); nullopt for a pattern of another
// replacement (%N, %n, %t, %s, a padded %4j), which only Slurm can fill.
std::optional<std::string> output_shell_word(std::string_view pattern, std::string_view job_name);

// `text` as one word for a POSIX shell: single-quoted, a quote inside written '\''.
std::string shell_quote(std::string_view text);

// The script for `config` (loaded from request.job_file with request.overrides).
std::string batch_script(const job_config& config, const batch_request& request);

// Writes `script` where muster-sbatch keeps the script of one submission, and returns that file:
// <runs_dir>/sbatch/<job name>-<stamp>.sbatch, or with -2, -3, ... before .sbatch where that
// file is there already (made with O_EXCL, so two submissions at once cannot share one), so that
// each submission keeps its own (scontrol show job names it). Creates <runs_dir>/sbatch. Throws
// errc::io naming the file, the reason and the fix.
std::filesystem::path write_script(const std::filesystem::path& runs_dir, std::string_view job_name,
                                   std::string_view stamp, std::string_view script);

// The arguments of `muster launch` the script's srun runs (without srun's own).
std::vector<std::string> launch_args(const job_config& config, const batch_request& request);

}  // namespace muster::slurm

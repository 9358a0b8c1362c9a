// The time limit Slurm holds for a running job, however it was set (sbatch --time, the script's
// #SBATCH line, the partition's DefaultTime): `squeue --noheader --jobs ID --format=%l`, asked
// once by node 0's launcher and recorded as a "time_limit" event (launcher_lines.hpp), which
// diagnose's advice on a time-limit stop reads.
#pragma once

#include <optional>
#include <string>

namespace muster::launcher {

// Slurm's text of job `job_id`'s limit ("4:00:00", "1-00:00:00", "UNLIMITED"), or std::nullopt
// when squeue does not say within 5 s (no squeue, no controller, an unknown job).
std::optional<std::string> ask_job_time_limit(const std::string& job_id);

}  // namespace muster::launcher

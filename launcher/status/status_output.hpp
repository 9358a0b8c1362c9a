// `muster status` as text for people and as JSON for tools (every field, and the per-step
// history).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launcher/status/run_status.hpp"
#include "launcher/status/slurm_jobs.hpp"

namespace muster::launcher::status {

std::string status_text(const run_status& s, store::epoch_ms now);
std::string status_json(const run_status& s, store::epoch_ms now);

// The runs, the run directories without a store (storeless_runs), and under Slurm the user's
// jobs (each with the run that records it). No runs: says where it looked (`runs_dir`).
std::string runs_text(const std::vector<run_entry>& runs, store::epoch_ms now,
                      const std::optional<slurm_job_list>& slurm = std::nullopt,
                      const std::vector<std::filesystem::path>& storeless = {},
                      const std::filesystem::path& runs_dir = {});
std::string runs_json(const std::vector<run_entry>& runs, store::epoch_ms now,
                      const std::optional<slurm_job_list>& slurm = std::nullopt,
                      const std::vector<std::filesystem::path>& storeless = {});

// A Slurm job of the user's with no run in `runs_dir` yet (pending, or not started by muster
// launch): what squeue says of it, and when its run appears.
std::string job_text(const slurm_job& job, const std::filesystem::path& runs_dir);
std::string job_json(const slurm_job& job);

// "4 s", "12 min", "3 h", "2 d".
std::string age_text(double seconds);

}  // namespace muster::launcher::status

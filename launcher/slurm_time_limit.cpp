// A running job's time limit from squeue: see slurm_time_limit.hpp.
#include "launcher/slurm_time_limit.hpp"

#include <chrono>

#include "common/run_program.hpp"

namespace muster::launcher {

std::optional<std::string> ask_job_time_limit(const std::string& job_id) {
  const auto run = run_program({"squeue", "--noheader", "--jobs", job_id, "--format=%l"},
                               std::chrono::seconds(5));
  if (!run.ok()) return std::nullopt;
  const auto& text = run.output;  // one line, its newline removed
  if (text.empty() || text.find_first_of(" \n") != std::string::npos) return std::nullopt;
  return text;
}

}  // namespace muster::launcher

// `scontrol requeue`: see slurm_requeue.hpp.
#include "launcher/slurm_requeue.hpp"

#include <fmt/format.h>

#include "common/run_program.hpp"

namespace muster::launcher {

requeue_result requeue_job(const std::string& job_id) {
  const auto run = run_program({"scontrol", "requeue", job_id}, std::chrono::seconds(30));
  if (!run.started)
    return {false,
            fmt::format("cannot run scontrol: {}; is Slurm's scontrol on PATH?", run.why_not)};
  if (run.timed_out) return {false, "scontrol requeue did not answer within 30 s"};
  std::string output = run.output;
  output.erase(output.find_last_not_of(" \n") + 1);  // scontrol's lines end in a newline
  if (output.empty()) output = run.ok() ? "ok" : "failed without a message";
  return {run.ok(), output};
}

}  // namespace muster::launcher

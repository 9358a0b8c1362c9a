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
  if (output.empty()) output = run.ok() ? "requeued" : "scontrol failed without a message";
  return {run.ok(), output};
}

}  // namespace muster::launcher

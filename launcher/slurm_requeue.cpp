// `scontrol requeue`, and the check before it: see slurm_requeue.hpp.
#include "launcher/slurm_requeue.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include "common/run_program.hpp"
#include "common/run_reader.hpp"
#include "launcher/launcher_lines.hpp"

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

requeue_history read_requeue_history(const store::run_paths& paths, store::epoch_ms started_ms) {
  requeue_history h;
  const store::run_reader reader(paths.dir());
  for (auto& r : reader.ranks())  // this start's ends (a rank of an earlier world may linger)
    if (r.updated_ms >= started_ms) h.ranks.push_back(std::move(r));
  h.first_steps = recorded_first_steps(reader.events());
  h.started_ms = started_ms;
  return h;
}

std::optional<std::string> requeue_in_vain(const requeue_history& h) {
  std::vector<std::int64_t> unhandled;
  for (const auto& r : h.ranks)
    if (r.signal && (*r.signal == SIGUSR1 || *r.signal == SIGUSR2)) unhandled.push_back(r.rank);
  if (!unhandled.empty())
    return fmt::format(
        "rank(s) {} ended by the signal itself (no handler for it, or none yet: still starting), "
        "so they saved no checkpoint, and a requeued job would start where this one did. "
        "Install a handler that saves and exits (muster-train has one), give the job time to "
        "start before the warning (a smaller slurm.checkpoint_lead), or set slurm.requeue = "
        "false",
        fmt::join(unhandled, ", "));
  // this start's first step, and the start before it's (the latest before this one began)
  std::optional<std::int64_t> now, then;
  for (const auto& [time, step] : h.first_steps) {
    if (time < h.started_ms) then = step;
    if (time >= h.started_ms && !now) now = step;
  }
  if (!now || !then || *now > *then) return std::nullopt;
  return fmt::format(
      "rank 0 had done {} steps at its first report of this start, and {} in the start before "
      "it: the stop that requeued it saved no checkpoint the program resumed from, so another "
      "requeue would train the same steps again. Check that the program saves on SIGUSR1 and "
      "resumes from the newest checkpoint (muster-train: checkpoint.dir, and checkpoint.load "
      "for a new run)",
      *now, *then);
}

}  // namespace muster::launcher

// `scontrol requeue`, and the check before it: see slurm_requeue.hpp.
#include "launcher/slurm_requeue.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <limits>

#include "common/run_program.hpp"
#include "common/run_reader.hpp"
#include "common/step_line.hpp"

namespace muster::launcher {
namespace {

// The first step rank 0 reported in [from, to), counted from 1 as `muster status` does.
std::optional<std::int64_t> first_step(const std::vector<store::step_record>& steps,
                                       store::epoch_ms from, store::epoch_ms to) {
  for (const auto& s : steps)
    if (s.time_ms >= from && s.time_ms < to) return s.step + 1;
  return std::nullopt;
}

}  // namespace

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
  h.ranks = reader.ranks();
  for (const auto& e : reader.events())
    if (e.kind == "requeue") h.requeued_ms.push_back(e.time_ms);
  h.rank0_steps = read_step_file(paths.rank_steps_file(0));
  h.started_ms = started_ms;
  return h;
}

std::optional<std::string> requeue_in_vain(const requeue_history& h) {
  std::vector<std::int64_t> unhandled;
  for (const auto& r : h.ranks)
    if (r.signal && (*r.signal == SIGUSR1 || *r.signal == SIGUSR2)) unhandled.push_back(r.rank);
  if (!unhandled.empty())
    return fmt::format(
        "rank(s) {} ended by the signal itself: the program has no handler for it, so it saved "
        "no checkpoint, and a requeued job would start where this one did. Install a handler "
        "that saves and exits (muster-train has one), or set slurm.requeue = false",
        fmt::join(unhandled, ", "));
  std::vector<store::epoch_ms> before;  // the requeues that ended earlier starts, in order
  for (const auto t : h.requeued_ms)
    if (t < h.started_ms) before.push_back(t);
  if (before.empty()) return std::nullopt;  // the first start: nothing to compare with
  std::sort(before.begin(), before.end());
  // the start before this one: after the requeue before the last (or the run's beginning)
  const store::epoch_ms previous_from = before.size() > 1 ? before[before.size() - 2] : 0;
  const auto now =
      first_step(h.rank0_steps, h.started_ms, std::numeric_limits<store::epoch_ms>::max());
  const auto then = first_step(h.rank0_steps, previous_from, h.started_ms);
  if (!now || !then || *now > *then) return std::nullopt;
  return fmt::format(
      "this start began at step {}, as the start before it did (step {}): the stop that "
      "requeued it saved no checkpoint the program resumed from, so another requeue would "
      "train the same steps again. Check that the program saves on SIGUSR1 and resumes from "
      "the newest checkpoint (muster-train: checkpoint.dir, and checkpoint.load for a new run)",
      *now, *then);
}

}  // namespace muster::launcher

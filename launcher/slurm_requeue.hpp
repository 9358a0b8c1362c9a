// Requeueing a Slurm job from inside it (launch.requeue_on_signal): `scontrol requeue <id>`,
// started with an argv (never a shell) from PATH, its output captured for the message; and
// the check before it, that the requeued job would not just train the same steps again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/run_dir.hpp"
#include "common/run_store_records.hpp"

namespace muster::launcher {

struct requeue_result {
  bool ok = false;
  std::string message;  // scontrol's output ("ok" when it says nothing), or why it did not run
};

// Runs `scontrol requeue <job_id>` and waits for it.
requeue_result requeue_job(const std::string& job_id);

// What a run's store says of the start that is about to ask for a requeue.
struct requeue_history {
  std::vector<store::rank_record> ranks;  // the ranks this start recorded
  // the steps rank 0 had done at its first report of each start ("first_step" events: time,
  // steps), in order
  std::vector<std::pair<store::epoch_ms, std::int64_t>> first_steps;
  store::epoch_ms started_ms = 0;  // when this start's launcher began
};

// The history of the run in `paths` for a start that began at `started_ms`.
requeue_history read_requeue_history(const store::run_paths& paths, store::epoch_ms started_ms);

// Why a requeue now would only train the same steps again, or nothing where it would not (or
// where nothing tells):
// - a rank the passed-on SIGUSR1/SIGUSR2 itself ended: the program has no handler for it, so
//   it saved nothing on it;
// - rank 0 had done no more steps at its first report of this start (from `started_ms` on)
//   than at its first report of the start before it (first_step events): the stop that
//   requeued it saved nothing the program resumed from, and this one will not either.
// A program that reports no steps is requeued as asked: nothing tells.
std::optional<std::string> requeue_in_vain(const requeue_history& history);

}  // namespace muster::launcher

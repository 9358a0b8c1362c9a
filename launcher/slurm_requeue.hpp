// Requeueing a Slurm job from inside it (launch.requeue_on_signal): `scontrol requeue <id>`,
// started with an argv (never a shell) from PATH, its output captured for the message.
#pragma once

#include <cstdint>
#include <string>

namespace muster::launcher {

struct requeue_result {
  bool ok = false;
  std::string message;  // scontrol's output ("ok" when it says nothing), or why it did not run
};

// Runs `scontrol requeue <job_id>` and waits for it.
requeue_result requeue_job(const std::string& job_id);

}  // namespace muster::launcher

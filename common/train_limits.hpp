// What the built-in engine, muster-train, cannot run yet, asked where the job is known: by the
// engine as it starts its ranks, and by the launchers before they start any (muster run and
// muster launch with no program after --, or muster-train named there), so a job it refuses
// fails at once with the reason and leaves no run directory behind.
#pragma once

#include "common/job_config.hpp"

namespace muster {

// Throws errc::invalid_input naming the keys and the fix when muster-train cannot run `config`.
void check_train_limits(const job_config& config);

}  // namespace muster

// What the launchers check of a job the built-in engine (muster-train) will run, before they
// make its run directory or start a rank: that muster-train can run its layout
// (common/train_limits.hpp), that its data opens and fits the model
// (engine/data/job_documents.hpp), and that checkpoint.load names a directory. A job refused here
// leaves nothing behind; the ranks check again as they start, on their own node's files.
#pragma once

#include <string>
#include <vector>

#include "common/job_config.hpp"

namespace muster::launcher {

// Throws errc::invalid_input naming the key and the fix when `argv` runs muster-train and
// `config` is a job it cannot run, data.paths does not open as data.format, or
// checkpoint.load is set and no directory; does nothing for a program of the user's own.
void check_engine_job(const job_config& config, const std::vector<std::string>& argv);

}  // namespace muster::launcher

// `muster node job ID [--json]`: what this node's musterd recorded of one job, for its owner
// and root: who owns it and how that is known, its steps (state, exit, run directory, the
// message of how it ended), the preflights it got and the environment decisions sent to it.
// The daemon's `job` request (daemon/job_request.hpp), printed for people.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace muster::cli {

// The reply of a `job` request as lines for people.
std::string node_job_text(const nlohmann::json& reply);

}  // namespace muster::cli

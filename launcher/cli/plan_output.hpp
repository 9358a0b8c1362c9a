// How `muster plan` prints a plan: a readable report (layout, the groups of rank 0 and of a
// sample rank, batch arithmetic, memory breakdown, verdict, fixes) or every detail as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "launcher/plan/job_plan.hpp"

namespace muster::cli {

// The report for a terminal; `sample_rank` is the second rank whose groups are shown.
std::string plan_text(const launcher::plan::job_plan& plan, int sample_rank);

// Everything: layout, every group, every rank's coordinates and group indices, batch, model,
// memory of every stage, warnings, notes and fixes. Sizes are in bytes.
nlohmann::json plan_json(const launcher::plan::job_plan& plan);

}  // namespace muster::cli

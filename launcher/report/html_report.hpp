// `muster report`: one self-contained HTML page of a run (inline CSS, inline SVG, a few lines
// of inline script to sort the tables; nothing fetched from the network): the run and its
// layout, the diagnosis (root first, evidence, fixes), the loss curve, tokens/s, step time per
// rank and step as a heatmap (stragglers show as a hot row), memory per rank against the
// planner's estimate, the ranks table and the events.
// Not here: diagnosing (launcher/diagnose/), the CLI (cli/report_verbs.cpp).
#pragma once

#include <string>

#include "common/run_store_records.hpp"
#include "launcher/diagnose/run_diagnosis.hpp"

namespace muster::launcher::report {

// The page for `d` (its run must have been read: d.run), as of `now`.
std::string html_report(const diagnose::run_diagnosis& d, store::epoch_ms now);

// At most this many columns (step buckets) and rows (rank groups) in the heatmap, and points
// in a line chart: a page for a 512-rank, 100k-step run stays a few MB.
inline constexpr std::size_t kMaxHeatColumns = 100;
inline constexpr std::size_t kMaxHeatRows = 512;
inline constexpr std::size_t kMaxLinePoints = 1000;
inline constexpr std::size_t kMaxEvents = 1000;

}  // namespace muster::launcher::report

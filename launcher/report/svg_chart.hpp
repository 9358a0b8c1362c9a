// Charts as inline SVG text for `muster report`: a line chart (loss, tokens/s), a heatmap
// (step time per rank and step: stragglers show as a hot row) and a bar chart (memory per
// rank). No script, no network, no fonts beyond the page's: each function returns one <svg>
// element sized in CSS pixels, with <title> tooltips on its marks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muster::launcher::report {

// Text made safe for HTML and SVG (&, <, >, ", ').
std::string escape(std::string_view text);

struct series {
  std::string name;
  std::string color;                              // CSS colour
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending; NaN y: a gap
};

struct line_chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<series> lines;
  int width = 560;
  int height = 260;
};

struct heatmap {
  std::string title;
  std::string x_label;                      // what the columns are ("step")
  std::vector<std::string> rows;            // row labels ("rank 3 (gpu-a07)")
  std::vector<std::string> columns;         // column labels ("12-19")
  std::vector<std::vector<double>> values;  // [row][column]; NaN: no value
  std::vector<std::vector<double>> ratio;   // [row][column] value / the column's median: colour
  std::string unit;                         // of values, for the tooltips ("s")
};

struct bar_chart {
  std::string title;
  std::string y_label;
  std::vector<std::string> labels;
  std::vector<double> values;
  std::optional<double> reference;  // a dashed line (the planner's estimate)
  std::string reference_label;
  std::string unit;  // "GiB"
  int height = 240;
};

std::string render(const line_chart& chart);
std::string render(const heatmap& map);
std::string render(const bar_chart& chart);

// The colour of a ratio to the median: green at or below 1, yellow at 1.2 (a straggler's
// threshold), red from 1.5.
std::string heat_colour(double ratio);

}  // namespace muster::launcher::report

// Charts as inline SVG text: see svg_chart.hpp.
#include "launcher/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "launcher/report/put.hpp"

namespace muster::launcher::report {
namespace {

// Tick values for [lo, hi]: about `count` round numbers (1, 2 or 5 times a power of ten).
std::vector<double> ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  std::vector<double> out;
  const double first = std::ceil(lo / step) * step;
  for (int i = 0; i <= 2 * count + 2; ++i) {  // by index: a step below an ulp never advances
    const double t = first + i * step;
    if (t > hi + step * 1e-9) break;
    out.push_back(t);
  }
  return out;
}

std::string tick_text(double v) {
  const double a = std::abs(v);
  if (a < 1e-12) return "0";  // never "-0" (a tick one rounding below zero)
  if (a != 0 && (a >= 1e6 || a < 1e-3)) return fmt::format("{:.1e}", v);
  if (a >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

constexpr int kLeft = 56, kRight = 12, kTop = 28, kBottom = 40;

void frame(std::string& out, int width, int height, const std::string& title) {
  put(out,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\"><title>{}</title>"
      "<text x=\"{}\" y=\"17\" class=\"chart-title\">{}</text>",
      width, height, width, height, escape(title), kLeft, escape(title));
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string heat_colour(double ratio) {
  if (std::isnan(ratio)) return "#e5e7eb";
  // hue 130 (green) at or below the median, 55 (yellow) at +20%, 0 (red) from +50%
  const double hue = ratio <= 1.0   ? 130
                     : ratio <= 1.2 ? 130 - (ratio - 1.0) / 0.2 * 75
                                    : std::max(0.0, 55 - (ratio - 1.2) / 0.3 * 55);
  return fmt::format("hsl({:.0f},70%,48%)", hue);
}

std::string render(const line_chart& c) {
  std::string out;
  frame(out, c.width, c.height, c.title);
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : c.lines)
    for (const auto& [x, y] : s.points) {
      if (std::isnan(y) || std::isinf(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  const int pw = c.width - kLeft - kRight, ph = c.height - kTop - kBottom;
  if (!(x1 >= x0)) {
    put(out, "<text x=\"{}\" y=\"{}\" class=\"chart-empty\">no data</text></svg>", kLeft + pw / 2,
        kTop + ph / 2);
    return out;
  }
  // a flat range (to rounding) gets a width of its own
  auto widen = [](double& lo, double& hi) {
    if (hi - lo <= 1e-9 * std::max(1.0, std::abs(lo))) {
      const double pad = std::max(0.5, std::abs(lo) * 0.05);
      lo -= pad, hi += pad;
    }
  };
  widen(y0, y1);
  widen(x0, x1);
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (y1 - y) / (y1 - y0) * ph; };
  for (double t : ticks(y0, y1, 5))
    put(out,
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
        kLeft, kLeft + pw, py(t), py(t), kLeft - 4, py(t) + 4, tick_text(t));
  for (double t : ticks(x0, x1, 6))
    put(out, "<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>", px(t),
        kTop + ph + 14, tick_text(t));
  put(out,
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"plot\"/>"
      "<text x=\"{}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>"
      "<text x=\"12\" y=\"{}\" class=\"axis\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 12 {})\">{}</text>",
      kLeft, kTop, pw, ph, kLeft + pw / 2, c.height - 6, escape(c.x_label), kTop + ph / 2,
      kTop + ph / 2, escape(c.y_label));
  int legend_x = kLeft + pw;
  for (const auto& s : c.lines) {
    std::string path;
    bool pen_up = true;
    for (const auto& [x, y] : s.points) {
      if (std::isnan(y) || std::isinf(y)) {
        pen_up = true;
        continue;
      }
      put(path, "{}{:.1f},{:.1f}", pen_up ? (path.empty() ? "M" : " M") : " L", px(x), py(y));
      pen_up = false;
    }
    put(out,
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"><title>{}</title></path>",
        path, s.color, escape(s.name));
    legend_x -= 8 + 7 * static_cast<int>(s.name.size());
    put(out, "<text x=\"{}\" y=\"17\" class=\"legend\" fill=\"{}\">{}</text>", legend_x, s.color,
        escape(s.name));
  }
  out += "</svg>";
  return out;
}

std::string render(const heatmap& m) {
  const int label_w = 150;
  const int rows = static_cast<int>(m.rows.size()), cols = static_cast<int>(m.columns.size());
  const int cell_w = cols > 0 ? std::clamp(640 / cols, 3, 24) : 24;
  const int cell_h = rows > 64 ? 4 : rows > 16 ? 10 : 18;
  const int width = label_w + cell_w * std::max(cols, 1) + 20;
  const int height = kTop + cell_h * std::max(rows, 1) + 46;
  std::string out;
  frame(out, width, height, m.title);
  if (rows == 0 || cols == 0) {
    put(out, "<text x=\"{}\" y=\"{}\" class=\"chart-empty\">no data</text></svg>", label_w,
        kTop + 14);
    return out;
  }
  for (int r = 0; r < rows; ++r) {
    const int y = kTop + r * cell_h;
    if (cell_h >= 10)
      put(out, "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>", label_w - 6,
          y + cell_h - 3, escape(m.rows[static_cast<std::size_t>(r)]));
    for (int c = 0; c < cols; ++c) {
      const double v = m.values[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      const double q = m.ratio[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      put(out,
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}, {} {}: "
          "{}</title></rect>",
          label_w + c * cell_w, y, cell_w, cell_h, heat_colour(q),
          escape(m.rows[static_cast<std::size_t>(r)]), escape(m.x_label),
          escape(m.columns[static_cast<std::size_t>(c)]),
          std::isnan(v)
              ? std::string("no step")
              : fmt::format("{:.3f} {} ({:+.0f}% against the median)", v, m.unit, (q - 1) * 100));
    }
  }
  const int bottom = kTop + rows * cell_h;
  put(out, "<text x=\"{}\" y=\"{}\" class=\"tick\">{} {}</text>", label_w, bottom + 14,
      escape(m.x_label), escape(m.columns.front()));
  put(out, "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>",
      label_w + cols * cell_w, bottom + 14, escape(m.columns.back()));
  // legend: the colours of 1.0, 1.2 and 1.5 times the median
  int x = label_w;
  for (auto [ratio, text] : {std::pair{1.0, "median or faster"}, std::pair{1.2, "+20%"},
                             std::pair{1.5, "+50% and slower"}}) {
    put(out,
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" class=\"legend\">{}</text>",
        x, bottom + 22, heat_colour(ratio), x + 16, bottom + 32, text);
    x += 40 + 7 * static_cast<int>(std::string_view(text).size());
  }
  out += "</svg>";
  return out;
}

std::string render(const bar_chart& c) {
  const int n = static_cast<int>(c.values.size());
  const int bar = n > 0 ? std::clamp(600 / n, 2, 40) : 40;
  const int pw = std::max(bar * std::max(n, 1), 260), ph = c.height - kTop - kBottom;
  const int width = kLeft + pw + kRight + 10;
  std::string out;
  frame(out, width, c.height, c.title);
  double top = 0;
  for (double v : c.values) top = std::max(top, v);
  if (c.reference) top = std::max(top, *c.reference);
  if (n == 0 || top <= 0) {
    put(out, "<text x=\"{}\" y=\"{}\" class=\"chart-empty\">no data</text></svg>", kLeft,
        kTop + ph / 2);
    return out;
  }
  top *= 1.08;
  auto py = [&](double y) { return kTop + (top - y) / top * ph; };
  for (double t : ticks(0, top, 4))
    put(out,
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
        kLeft, kLeft + pw, py(t), py(t), kLeft - 4, py(t) + 4, tick_text(t));
  for (int i = 0; i < n; ++i) {
    const double v = c.values[static_cast<std::size_t>(i)];
    put(out,
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" class=\"bar\"><title>{}: "
        "{:.2f} "
        "{}</title></rect>",
        kLeft + i * bar + (bar > 4 ? 1 : 0), py(v), bar > 4 ? bar - 2 : bar, py(0) - py(v),
        escape(c.labels[static_cast<std::size_t>(i)]), v, escape(c.unit));
    if (bar >= 16)
      put(out, "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
          kLeft + i * bar + bar / 2, kTop + ph + 14, escape(c.labels[static_cast<std::size_t>(i)]));
  }
  if (c.reference)
    put(out,
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"reference\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"legend\" text-anchor=\"end\">{}</text>",
        kLeft, kLeft + pw, py(*c.reference), py(*c.reference), kLeft + pw, py(*c.reference) - 4,
        escape(c.reference_label));
  put(out,
      "<text x=\"12\" y=\"{}\" class=\"axis\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 12 {})\">{}</text></svg>",
      kTop + ph / 2, kTop + ph / 2, escape(c.y_label));
  return out;
}

}  // namespace muster::launcher::report

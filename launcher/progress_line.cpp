// The console's progress line: see progress_line.hpp.
#include "launcher/progress_line.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace muster::launcher {

std::string format_eta(std::chrono::seconds left) {
  const auto s = std::max<std::int64_t>(0, left.count());
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::string format_rate(double per_s) {
  if (per_s >= 1e6) return fmt::format("{:.2f}M", per_s / 1e6);
  if (per_s >= 1e4) return fmt::format("{:.1f}k", per_s / 1e3);
  return fmt::format("{:.0f}", per_s);
}

std::optional<std::string> progress_meter::line(const heartbeat_progress& p,
                                                clock::time_point now) {
  if (!p.step) return std::nullopt;
  if (!first_ || *p.step < first_->second) first_ = {now, *p.step};  // a restart starts over
  std::string text = p.steps ? fmt::format("step {}/{}", *p.step, *p.steps)
                             : fmt::format("step {}", *p.step);
  if (p.loss) text += fmt::format(" | loss {:.4f}", *p.loss);
  if (p.tokens_per_s) text += fmt::format(" | {} tok/s", format_rate(*p.tokens_per_s));
  if (p.steps) {
    const double seconds = std::chrono::duration<double>(now - first_->first).count();
    const auto moved = *p.step - first_->second;
    if (moved > 0 && seconds > 0) {
      const double left = static_cast<double>(*p.steps - *p.step) * seconds / static_cast<double>(moved);
      constexpr double kYear = 365.0 * 24 * 3600;  // beyond that an ETA says nothing
      text += " | ETA " + format_eta(std::chrono::seconds(std::llround(std::clamp(left, 0.0, kYear))));
    } else {
      text += " | ETA --";
    }
  }
  return text;
}

}  // namespace muster::launcher

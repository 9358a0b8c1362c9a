// The learning-rate schedule: see lr_schedule.hpp.
#include "engine/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace muster::engine::train {

double lr_at(int step, const train_section& t) {
  if (step < t.warmup_steps) return t.lr * double(step + 1) / double(t.warmup_steps);
  const int decay_steps = std::max(1, t.steps - t.warmup_steps - 1);
  const double progress = std::clamp(double(step - t.warmup_steps) / decay_steps, 0.0, 1.0);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace muster::engine::train

// The optimizer's loops on the CPU: see include/muster/kernels/optimizer.hpp.
// Written so the compiler vectorizes them: no branches in the loop body, no aliasing.
#include "muster/kernels/optimizer.hpp"

#include <cmath>

#include "vector_targets.hpp"

namespace muster::kernels::cpu {

MUSTER_VECTOR_CLONES void adamw_update(const adamw_scalars& s, float* __restrict param, const float* __restrict grad,
                  float* __restrict exp_avg, float* __restrict exp_avg_sq,
                  const float* __restrict decay_mask, std::int64_t n) {
  const float beta1 = float(s.beta1), beta2 = float(s.beta2), eps = float(s.eps);
  const float one_minus_beta1 = float(1 - s.beta1), one_minus_beta2 = float(1 - s.beta2);
  const float sqrt_bias2 = float(std::sqrt(1 - std::pow(s.beta2, double(s.step))));
  const float step_size = float(s.lr / (1 - std::pow(s.beta1, double(s.step))));
  const float decay = float(s.lr * s.weight_decay);
  // As torch: m.mul_(beta1).add_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, 1 - beta2);
  // denom = v.sqrt() / sqrt(bias2) + eps; p.addcdiv_(m, denom, -step_size).
  auto body = [&](std::int64_t i, float keep) {
    const float g = grad[i];
    const float m = exp_avg[i] * beta1 + one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * beta2 + one_minus_beta2 * (g * g);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = std::sqrt(v) / sqrt_bias2 + eps;
    param[i] = param[i] * keep + -step_size * (m / denom);
  };
  if (decay_mask && decay != 0) {
    for (std::int64_t i = 0; i < n; ++i) body(i, 1.0f - decay * decay_mask[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) body(i, 1.0f);
  }
}

MUSTER_VECTOR_CLONES double sum_of_squares(const float* __restrict x, std::int64_t n) {
  // Eight running sums (a fixed order, and independent lanes the compiler can vectorize).
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double v = x[i + j];
      lane[j] += v * v;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const double v = x[i];
    lane[j] += v * v;
  }
  double sum = 0;
  for (double l : lane) sum += l;
  return sum;
}

}  // namespace muster::kernels::cpu

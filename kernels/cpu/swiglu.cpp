// SwiGLU on the CPU: see include/muster/kernels/swiglu.hpp.
// The loops vectorize: exp is our own (exp_approx.hpp), not libm's.
#include "muster/kernels/swiglu.hpp"

#include "exp_approx.hpp"
#include "vector_targets.hpp"

#include <cmath>
#include <cstdint>

namespace muster::kernels::cpu {
namespace {

// 1 / (1 + e^-x), from e = e^-|x| (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e) below.
inline float sigmoid(float x) {
  const float e = exp_approx(-std::abs(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

}  // namespace

MUSTER_VECTOR_CLONES void swiglu_forward(const float* __restrict gate, const float* __restrict up,
                    float* __restrict out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = gate[i];
    out[i] = a * sigmoid(a) * up[i];
  }
}

MUSTER_VECTOR_CLONES void swiglu_backward(const float* __restrict gate, const float* __restrict up,
                     const float* __restrict grad_out, float* __restrict grad_gate,
                     float* __restrict grad_up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = gate[i], g = grad_out[i];
    const float s = sigmoid(a);
    grad_up[i] = g * (a * s);
    grad_gate[i] = g * up[i] * (s * (1.0f + a * (1.0f - s)));
  }
}

}  // namespace muster::kernels::cpu

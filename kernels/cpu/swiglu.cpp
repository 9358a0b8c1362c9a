// SwiGLU on the CPU: see include/muster/kernels/swiglu.hpp.
// The loops vectorize: exp is written out (range reduction and a polynomial, as Cephes' expf)
// instead of calling libm's, which the compiler cannot vectorize without -ffast-math.
#include "muster/kernels/swiglu.hpp"

#include "vector_targets.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace muster::kernels::cpu {
namespace {

// e^x for fp32 x in [-87.3, 88], within about 2 ulp; 0 below (e^-87.3 is about the smallest
// normal fp32), e^88 above (2^n would need an exponent of 128), NaN for NaN.
inline float exp_approx(float x) {
  const float input = x;
  const bool underflow = x < -87.3f;
  x = std::min(88.0f, std::max(-87.3f, x));  // in this order NaN clamps too (no NaN reaches the int)
  // x = n * ln2 + r, |r| <= ln2 / 2; n rounded to nearest by the 1.5 * 2^23 trick.
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n from its exponent bits
  const auto bits = static_cast<std::int32_t>(n + 127.0f) << 23;
  const float e = underflow ? 0.0f : y * std::bit_cast<float>(bits);
  return input != input ? input : e;
}

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

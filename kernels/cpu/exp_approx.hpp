// e^x for fp32 written out (range reduction and a polynomial, as Cephes' expf), so the loops
// that call it vectorize: libm's expf does not without -ffast-math.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace muster::kernels::cpu {

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

}  // namespace muster::kernels::cpu

// bfloat16 as the kernels store it: the top 16 bits of an fp32 (sign, 8 exponent bits, 7
// mantissa bits), the layout of torch's at::BFloat16 and CUDA's __nv_bfloat16, so their pointers
// convert. The kernels' bf16 overloads read and write it and compute in fp32. C++17: the CUDA
// sources include it.
#pragma once

#include <cstdint>
#include <cstring>

namespace muster::kernels {

struct bf16 {
  std::uint16_t bits = 0;
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes, as at::BFloat16 and __nv_bfloat16");

inline float to_float(bf16 v) {
  const std::uint32_t u = std::uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// fp32 -> bf16 rounded to nearest, ties to even (as at::BFloat16 and __float2bfloat16_rn);
// NaN becomes at::BFloat16's quiet NaN 0x7fc0, values past the largest bf16 infinity.
inline bf16 to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fc0};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{std::uint16_t(u >> 16)};
}

}  // namespace muster::kernels

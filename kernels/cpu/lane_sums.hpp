// Sums over fp32 arrays in eight running lanes: the loops vectorize and the order of the
// additions is fixed (the same bits on every run and every vector width).
#pragma once

#include <cstdint>

namespace muster::kernels::cpu {

inline constexpr int kLanes = 8;

// sum over i < n of a[i] * b[i]
inline float dot_lanes(const float* __restrict a, const float* __restrict b, std::int64_t n) {
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) lane[j] += a[i] * b[i];
  float sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

// sum over i < n of a[i]
inline float sum_lanes(const float* __restrict a, std::int64_t n) {
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += a[i + j];
  for (int j = 0; i < n; ++i, ++j) lane[j] += a[i];
  float sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

}  // namespace muster::kernels::cpu

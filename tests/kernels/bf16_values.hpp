// bf16 test inputs and checks for the kernel tests: draws rounded to bf16, the fp32 values they
// stand for, and the distance between two bf16 values in units in the last place.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "muster/kernels/bf16.hpp"
#include "tests/kernels/normal_draws.hpp"

namespace muster::test {

inline std::vector<kernels::bf16> to_bf16(const std::vector<float>& v) {
  std::vector<kernels::bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = kernels::to_bf16(v[i]);
  return out;
}

inline std::vector<float> to_float(const std::vector<kernels::bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = kernels::to_float(v[i]);
  return out;
}

inline std::vector<kernels::bf16> bf16_draws(std::size_t n, std::uint32_t seed) {
  return to_bf16(normal_draws(n, seed));
}

// How many bf16 values lie between a and b (0: equal; both finite, not NaN): their bits on
// one ordered scale.
inline int ulps_apart(kernels::bf16 a, kernels::bf16 b) {
  auto ordered = [](kernels::bf16 v) {
    const int bits = v.bits;
    return bits & 0x8000 ? -(bits & 0x7fff) : bits;
  };
  return std::abs(ordered(a) - ordered(b));
}

// The most ulps any element of `got` lies from `want`'s, the first few over `bound` described.
inline int worst_ulps(const std::vector<kernels::bf16>& got, const std::vector<kernels::bf16>& want,
                      int bound, std::string& report) {
  std::ostringstream out;
  int worst = 0, shown = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const int apart = ulps_apart(got[i], want[i]);
    worst = apart > worst ? apart : worst;
    if (apart > bound && shown++ < 5)
      out << "  [" << i << "] got " << kernels::to_float(got[i]) << " want "
          << kernels::to_float(want[i]) << " (" << apart << " ulps)\n";
  }
  if (got.size() != want.size()) return 1 << 20;
  report = out.str();
  return worst;
}

}  // namespace muster::test

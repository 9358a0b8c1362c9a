// Test inputs for the kernel tests: n draws from N(0, 1), the same for the same seed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace muster::test {

inline std::vector<float> normal_draws(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace muster::test

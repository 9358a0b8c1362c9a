// The seed of a randomized test: MUSTER_TEST_SEED when set (to replay a failure), else a fresh
// random one. Tests print it with INFO so a failure names the seed that replays it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace muster::test {

inline std::uint64_t test_seed() {
  if (const char* text = std::getenv("MUSTER_TEST_SEED")) return std::stoull(text);
  return std::random_device{}();
}

}  // namespace muster::test

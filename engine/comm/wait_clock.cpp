// How long this process has been blocked in collectives: see wait_clock.hpp.
#include "engine/comm/wait_clock.hpp"

#include <atomic>
#include <cstdint>

namespace muster::engine::comm {
namespace {

std::atomic<std::int64_t> waited_ns{0};

}  // namespace

void add_wait_seconds(double seconds) {
  waited_ns.fetch_add(static_cast<std::int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

double waited_seconds() {
  return static_cast<double>(waited_ns.load(std::memory_order_relaxed)) / 1e9;
}

}  // namespace muster::engine::comm

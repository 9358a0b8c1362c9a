// A rank's memory: see device_memory.hpp.
#include "engine/train/device_memory.hpp"

#include <algorithm>
#include <fstream>

#ifdef MUSTER_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace muster::engine::train {
namespace {

// This process's resident memory now and at its peak, from /proc/self/status.
memory_reading resident() {
  std::ifstream status("/proc/self/status");
  memory_reading r{0, 0, "cpu"};
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) r.step_bytes = std::stoll(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) r.peak_bytes = std::stoll(line.substr(6)) * 1024;
  }
  return r;
}

}  // namespace

memory_reading memory_meter::read() {
#ifdef MUSTER_TORCH_CUDA
  if (device_.is_cuda()) {
    namespace allocator = c10::cuda::CUDACachingAllocator;
    // index 0 of each statistic is the aggregate of the small and large pools (StatType)
    const auto stats = allocator::getDeviceStats(device_.index());
    const std::int64_t step = stats.reserved_bytes[0].peak;
    allocator::resetPeakStats(device_.index());
    peak_ = std::max(peak_, step);
    return {step, peak_, "cuda"};
  }
#endif
  return resident();
}

}  // namespace muster::engine::train

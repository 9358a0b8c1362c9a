// A value for each CUDA device, made the first time the current device asks for it (its pool, its
// SM count, a kernel's attribute set on it) and kept for the process: never destroyed by us, as
// a handle released after the CUDA runtime's teardown at exit would crash there.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "kernels/cuda/cuda_check.hpp"

namespace muster::kernels::cuda {

template <class T>
class per_device {
 public:
  // The current device's value, made by make(device) on its first use (under the lock: once).
  template <class Make>
  T get(const Make& make) {
    int device = 0;
    MUSTER_CUDA_CHECK(cudaGetDevice(&device));
    const std::lock_guard lock(mutex_);
    auto found = values_.find(device);
    if (found == values_.end()) found = values_.emplace(device, make(device)).first;
    return found->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, T> values_;
};

}  // namespace muster::kernels::cuda

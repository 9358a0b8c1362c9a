// MUSTER_CUDA_CHECK(call): throws std::runtime_error naming the call, file:line and CUDA's
// error string when a CUDA runtime call (or the launch before cudaGetLastError) fails.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define MUSTER_CUDA_CHECK(call)                                                                \
  do {                                                                                         \
    const cudaError_t muster_cuda_status_ = (call);                                            \
    if (muster_cuda_status_ != cudaSuccess)                                                    \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #call + ": " + cudaGetErrorString(muster_cuda_status_));        \
  } while (0)

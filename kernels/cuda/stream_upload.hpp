// Small host tables a kernel or a batched cuBLAS call reads on the device (pointer arrays,
// group tables): copied into a stream-ordered allocation for one call and freed on the stream
// after it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_check.hpp"

namespace muster::kernels::cuda {

// The uploads' stream-ordered pool on the current device: one of our own that keeps the memory
// it has. The device's default pool gives its memory back at every synchronisation (a MoE
// layer's copy of its counts to the host is one), so the next allocation would map memory again.
cudaMemPool_t upload_pool();

// Copies `bytes` from `host` to the device on `stream`, calls `call(device address)`, and frees
// the copy on the stream after what `call` enqueued (also when it throws).
template <class Call>
void with_uploaded(const void* host, std::size_t bytes, cudaStream_t stream, const Call& call) {
  void* device = nullptr;
  MUSTER_CUDA_CHECK(cudaMallocFromPoolAsync(&device, bytes, upload_pool(), stream));
  try {
    MUSTER_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    call(static_cast<const void*>(device));
  } catch (...) {
    cudaFreeAsync(device, stream);
    throw;
  }
  MUSTER_CUDA_CHECK(cudaFreeAsync(device, stream));
}

}  // namespace muster::kernels::cuda

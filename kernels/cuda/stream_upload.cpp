// The uploads' pool: see kernels/cuda/stream_upload.hpp.
#include "kernels/cuda/stream_upload.hpp"

#include <cstdint>
#include <map>
#include <mutex>

namespace muster::kernels::cuda {

cudaMemPool_t upload_pool() {
  static std::mutex mutex;
  static std::map<int, cudaMemPool_t> pools;  // never destroyed, as the cuBLAS handles
  int device = 0;
  MUSTER_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard lock(mutex);
  auto& pool = pools[device];
  if (pool == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    MUSTER_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = UINT64_MAX;
    MUSTER_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  return pool;
}

}  // namespace muster::kernels::cuda

// The uploads' pool: see kernels/cuda/stream_upload.hpp.
#include "kernels/cuda/stream_upload.hpp"

#include <cstdint>

#include "kernels/cuda/per_device.hpp"

namespace muster::kernels::cuda {

cudaMemPool_t upload_pool() {
  static per_device<cudaMemPool_t> pools;
  return pools.get([](int device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    MUSTER_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = UINT64_MAX;
    MUSTER_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    return pool;
  });
}

}  // namespace muster::kernels::cuda

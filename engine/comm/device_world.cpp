// The world group for a device: see device_world.hpp.
#include "engine/comm/device_world.hpp"

#include <numeric>
#include <vector>

#include "common/error.hpp"

#ifdef MUSTER_WITH_CUDA
#include "engine/comm/nccl_communicator.hpp"
#endif

namespace muster::engine::comm {

std::shared_ptr<communicator> make_device_world(torch::Device device, const world_options& options,
                                                [[maybe_unused]] bool nccl_ub) {
  auto gloo = make_world(options);
  if (!device.is_cuda()) return gloo;
#ifdef MUSTER_WITH_CUDA
  std::vector<int> all(static_cast<std::size_t>(gloo->size()));
  std::iota(all.begin(), all.end(), 0);
  nccl_options nccl;
  nccl.user_buffers = nccl_ub;
  return make_nccl_group(*gloo, "nccl-world", all, nccl);
#else
  MUSTER_THROW(errc::config,
               "train.device is a CUDA device but this muster-train was built without CUDA "
               "(MUSTER_CUDA found no nvcc): build it with the CUDA toolkit (docs/gpu.md)");
#endif
}

}  // namespace muster::engine::comm

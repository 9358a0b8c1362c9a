// Choosing the rank's device: see device_choice.hpp.
#include "engine/train/device_choice.hpp"

#include <cstdlib>
#include <string>

#include <torch/cuda.h>

#ifdef MUSTER_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "common/error.hpp"

namespace muster::engine::train {

torch::Device training_device(const train_section& train) {
  if (train.device == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (!cuda) {
    MUSTER_CHECK(train.device != "cuda", errc::config,
                 "train.device = \"cuda\" but {}; build muster-train against a LibTorch with CUDA "
                 "(docs/gpu.md: tools/gpu/build.sh) on a machine with a GPU, or set "
                 "train.device = \"cpu\"",
                 torch::hasCUDA() ? "no CUDA device is visible (CUDA_VISIBLE_DEVICES=" +
                                        std::string(std::getenv("CUDA_VISIBLE_DEVICES")
                                                        ? std::getenv("CUDA_VISIBLE_DEVICES")
                                                        : "unset") +
                                        ")"
                                  : "this muster-train's LibTorch has no CUDA (Debian's is "
                                    "CPU-only)");
    return torch::kCPU;
  }
  const char* local = std::getenv("LOCAL_RANK");
  const auto count = static_cast<int>(torch::cuda::device_count());
  const int index = (local && *local ? std::atoi(local) : 0) % count;
#ifdef MUSTER_TORCH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#endif
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

}  // namespace muster::engine::train

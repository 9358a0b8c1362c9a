// Which tensors the kernels behind engine/ops take: contiguous fp32 on the CPU, or on a CUDA
// device when muster_kernels has its CUDA half (the one check every adapter makes before handing
// a tensor's pointer to kernels/), and the stream a CUDA kernel is enqueued on: LibTorch's
// current stream where LibTorch has CUDA (MUSTER_TORCH_CUDA), else the default stream.
#pragma once

#include <torch/torch.h>

#ifdef MUSTER_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace muster::engine::ops {

// fp32 on the CPU, whatever its strides (adapters that make their inputs contiguous themselves)
inline bool cpu_fp32(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32;
}

inline bool cpu_kernel_takes(const torch::Tensor& t) {
  return cpu_fp32(t) && t.is_contiguous();
}

inline constexpr bool have_cuda_kernels() {
#ifdef MUSTER_WITH_CUDA
  return true;
#else
  return false;
#endif
}

// fp32 (or another of `dtypes`) on a CUDA device, contiguous, with the CUDA kernels built.
inline bool cuda_kernel_takes(const torch::Tensor& t,
                              std::initializer_list<torch::ScalarType> dtypes = {torch::kFloat32}) {
  if (!have_cuda_kernels() || !t.defined() || !t.is_cuda() || !t.is_contiguous()) return false;
  for (const auto d : dtypes)
    if (t.scalar_type() == d) return true;
  return false;
}

// The cudaStream_t a kernel on `t`'s device is enqueued on (nullptr: the default stream).
inline void* kernel_stream([[maybe_unused]] const torch::Tensor& t) {
#ifdef MUSTER_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  return nullptr;
#endif
}

}  // namespace muster::engine::ops

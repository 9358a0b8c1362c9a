// Which tensors the kernels behind engine/ops take: contiguous fp32 on the CPU, or on a CUDA
// device when muster_kernels has its CUDA half (the one check every adapter makes before handing
// a tensor's pointer to kernels/), the stream a CUDA kernel is enqueued on (LibTorch's current
// stream where LibTorch has CUDA, MUSTER_TORCH_CUDA; else the default stream), and the kernels'
// element types for adapters that take fp32 and bf16 alike.
#pragma once

#include <ATen/DeviceGuard.h>
#include <torch/torch.h>

#include <type_traits>

#include "muster/kernels/bf16.hpp"

#ifdef MUSTER_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace muster::engine::ops {

// fp32 on the CPU, whatever its strides (adapters that make their inputs contiguous themselves)
inline bool cpu_fp32(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32;
}

// The element types an adapter for fp32 and bf16 takes (with_element_type below).
inline constexpr std::initializer_list<torch::ScalarType> kFp32AndBf16 = {torch::kFloat32,
                                                                         torch::kBFloat16};

inline bool dtype_in(const torch::Tensor& t, std::initializer_list<torch::ScalarType> dtypes) {
  for (const auto d : dtypes)
    if (t.scalar_type() == d) return true;
  return false;
}

// fp32 (or another of `dtypes`) on the CPU, contiguous.
inline bool cpu_kernel_takes(const torch::Tensor& t,
                             std::initializer_list<torch::ScalarType> dtypes = {torch::kFloat32}) {
  return t.defined() && t.device().is_cpu() && t.is_contiguous() && dtype_in(t, dtypes);
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
  return have_cuda_kernels() && t.defined() && t.is_cuda() && t.is_contiguous() &&
         dtype_in(t, dtypes);
}

// Calls body with a value of the kernels' element type for t: kernels::bf16 for a bf16 tensor,
// else float (callers have checked that t is one of the two).
template <class Body>
decltype(auto) with_element_type(const torch::Tensor& t, Body&& body) {
  if (t.scalar_type() == torch::kBFloat16) return body(kernels::bf16{});
  return body(float{});
}

// t's elements as the kernels' type T (float or kernels::bf16, whose layout is at::BFloat16's).
template <class T>
T* elements(const torch::Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.data_ptr<float>();
  } else {
    static_assert(std::is_same_v<T, kernels::bf16> && sizeof(at::BFloat16) == sizeof(T));
    return reinterpret_cast<T*>(t.data_ptr<at::BFloat16>());
  }
}

// The cudaStream_t a kernel on `t`'s device is enqueued on (nullptr: the default stream).
inline void* kernel_stream([[maybe_unused]] const torch::Tensor& t) {
#ifdef MUSTER_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  return nullptr;
#endif
}

// t's device the current one until the guard goes (nothing for a CPU tensor): the kernels launch
// on the current device, and LibTorch's current stream and cuBLAS handle are the current
// device's. A rank that set its device (engine/train/device_choice) is there already; a caller
// with tensors on another device is not. Each op taking a CUDA kernel holds one, as c10d's do.
inline c10::OptionalDeviceGuard on_device_of(const torch::Tensor& t) {
  return c10::OptionalDeviceGuard(at::device_of(t));
}

}  // namespace muster::engine::ops

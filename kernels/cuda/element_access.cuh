// How the CUDA kernels read and write their element types: fp32, and bf16 as __nv_bfloat16
// (the layout of muster::kernels::bf16, so the API's pointers are cast to it). Values are
// computed in fp32; a store to bf16 rounds to nearest even. pack<T> is 16 bytes of T, the unit
// of the kernels' vector loads and stores when their buffers are 16-byte aligned.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "muster/kernels/bf16.hpp"

namespace muster::kernels::cuda {

__device__ __forceinline__ float load(float v) {
  return v;
}
__device__ __forceinline__ float load(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ void store(float& to, float v) {
  to = v;
}
__device__ __forceinline__ void store(__nv_bfloat16& to, float v) {
  to = __float2bfloat16_rn(v);
}

template <class T>
struct alignas(16) pack {
  static constexpr int kLanes = 16 / sizeof(T);
  T v[kLanes];
};

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The API's bf16 pointers as CUDA's type (the same two bytes).
inline const __nv_bfloat16* device_type(const bf16* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
inline __nv_bfloat16* device_type(bf16* p) {
  return reinterpret_cast<__nv_bfloat16*>(p);
}
inline const float* device_type(const float* p) {
  return p;
}
inline float* device_type(float* p) {
  return p;
}

}  // namespace muster::kernels::cuda

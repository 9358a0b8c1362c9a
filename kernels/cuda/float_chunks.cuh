// What the CUDA kernels that give a warp a row share (router.cu, rms_norm.cu): a warp's sum,
// rows moved in chunks of up to 4 consecutive floats (16 bytes) a lane in one access, or 4 bf16
// (8 bytes) read as floats and written rounded to nearest even, and the test of whether rows at
// given pointers can be.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

namespace muster::kernels::cuda {

// The sum of v over the warp's 32 lanes, in every lane.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// kWidth (1, 2 or 4) consecutive floats from or to `p`, in one access (p is aligned to kWidth
// floats).
template <int kWidth>
__device__ __forceinline__ void load_chunk(const float* p, float* v) {
  if constexpr (kWidth == 4) {
    const float4 c = *reinterpret_cast<const float4*>(p);
    v[0] = c.x, v[1] = c.y, v[2] = c.z, v[3] = c.w;
  } else if constexpr (kWidth == 2) {
    const float2 c = *reinterpret_cast<const float2*>(p);
    v[0] = c.x, v[1] = c.y;
  } else {
    v[0] = *p;
  }
}

template <int kWidth>
__device__ __forceinline__ void store_chunk(float* p, const float* v) {
  if constexpr (kWidth == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else if constexpr (kWidth == 2)
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  else
    *p = v[0];
}

// kWidth (1, 2 or 4) consecutive bf16 from or to `p` as floats, in one access (p is aligned
// to kWidth bf16).
template <int kWidth>
__device__ __forceinline__ void load_chunk(const __nv_bfloat16* p, float* v) {
  if constexpr (kWidth == 4) {
    const uint2 c = *reinterpret_cast<const uint2*>(p);
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&c.x);
    const __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&c.y);
    v[0] = __low2float(a), v[1] = __high2float(a), v[2] = __low2float(b), v[3] = __high2float(b);
  } else if constexpr (kWidth == 2) {
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(p);
    v[0] = __low2float(a), v[1] = __high2float(a);
  } else {
    v[0] = __bfloat162float(*p);
  }
}

template <int kWidth>
__device__ __forceinline__ void store_chunk(__nv_bfloat16* p, const float* v) {
  if constexpr (kWidth == 4) {
    const __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]);
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const unsigned*>(&a),
                                              *reinterpret_cast<const unsigned*>(&b));
  } else if constexpr (kWidth == 2) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v[0], v[1]);
  } else {
    *p = __float2bfloat16_rn(v[0]);
  }
}

// Whether rows of `cols` floats at these pointers (null: none) move in chunks of `width`
// floats: cols a multiple of it, every pointer aligned to it.
inline bool rows_in_chunks(std::int64_t width, std::int64_t cols,
                           std::initializer_list<const void*> rows) {
  if (cols % width != 0) return false;
  for (const void* p : rows)
    if (reinterpret_cast<std::uintptr_t>(p) % (width * sizeof(float)) != 0) return false;
  return true;
}

}  // namespace muster::kernels::cuda

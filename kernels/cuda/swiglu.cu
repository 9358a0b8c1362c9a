// SwiGLU on the GPU: see muster/kernels/swiglu.hpp. Elementwise, grid-stride, four elements a
// thread through float4 when the three buffers are 16-byte aligned, the tail one by one.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/swiglu.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoid(float x) {
  return 1.0f / (1.0f + __expf(-x));
}

__device__ void forward_one(float a, float b, float& y) {
  y = a * sigmoid(a) * b;
}

__device__ void backward_one(float a, float b, float g, float& da, float& db) {
  const float s = sigmoid(a);
  db = g * a * s;
  da = g * b * s * (1.0f + a * (1.0f - s));
}

__global__ void forward_kernel(const float* gate, const float* up, float* out, std::int64_t n,
                               bool vector) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vector) {
    const std::int64_t n4 = n / 4;
    const auto* a4 = reinterpret_cast<const float4*>(gate);
    const auto* b4 = reinterpret_cast<const float4*>(up);
    auto* y4 = reinterpret_cast<float4*>(out);
    for (std::int64_t v = i; v < n4; v += stride) {
      const float4 a = a4[v], b = b4[v];
      float4 y;
      forward_one(a.x, b.x, y.x);
      forward_one(a.y, b.y, y.y);
      forward_one(a.z, b.z, y.z);
      forward_one(a.w, b.w, y.w);
      y4[v] = y;
    }
    done = n4 * 4;
  }
  for (std::int64_t k = done + i; k < n; k += stride) forward_one(gate[k], up[k], out[k]);
}

__global__ void backward_kernel(const float* gate, const float* up, const float* grad_out,
                                float* grad_gate, float* grad_up, std::int64_t n, bool vector) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vector) {
    const std::int64_t n4 = n / 4;
    const auto* a4 = reinterpret_cast<const float4*>(gate);
    const auto* b4 = reinterpret_cast<const float4*>(up);
    const auto* g4 = reinterpret_cast<const float4*>(grad_out);
    auto* da4 = reinterpret_cast<float4*>(grad_gate);
    auto* db4 = reinterpret_cast<float4*>(grad_up);
    for (std::int64_t v = i; v < n4; v += stride) {
      const float4 a = a4[v], b = b4[v], g = g4[v];
      float4 da, db;
      backward_one(a.x, b.x, g.x, da.x, db.x);
      backward_one(a.y, b.y, g.y, da.y, db.y);
      backward_one(a.z, b.z, g.z, da.z, db.z);
      backward_one(a.w, b.w, g.w, da.w, db.w);
      da4[v] = da;
      db4[v] = db;
    }
    done = n4 * 4;
  }
  for (std::int64_t k = done + i; k < n; k += stride)
    backward_one(gate[k], up[k], grad_out[k], grad_gate[k], grad_up[k]);
}

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

unsigned blocks_for(std::int64_t n) {
  // enough blocks to fill an H100 several times over; the loop strides over the rest
  const std::int64_t wanted = (n / 4 + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(wanted, 132 * 16)));
}

}  // namespace

void swiglu_forward(const float* gate, const float* up, float* out, std::int64_t n, void* stream) {
  if (n <= 0) return;
  const bool vector = aligned(gate) && aligned(up) && aligned(out);
  forward_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(gate, up, out,
                                                                                    n, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void swiglu_backward(const float* gate, const float* up, const float* grad_out, float* grad_gate,
                     float* grad_up, std::int64_t n, void* stream) {
  if (n <= 0) return;
  const bool vector =
      aligned(gate) && aligned(up) && aligned(grad_out) && aligned(grad_gate) && aligned(grad_up);
  backward_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      gate, up, grad_out, grad_gate, grad_up, n, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

// SwiGLU on the GPU: see muster/kernels/swiglu.hpp. Elementwise, grid-stride, 16 bytes a thread
// (4 fp32 or 8 bf16 elements) when every buffer is 16-byte aligned, the tail one by one; fp32
// arithmetic for both types. Packed rows (gate | up) are the same kernels with the gate and up
// read at their places in the rows (row_layout).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/element_access.cuh"
#include "muster/kernels/swiglu.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float sigmoid(float x) {
  return 1.0f / (1.0f + __expf(-x));
}

__device__ float forward_one(float a, float b) {
  return a * sigmoid(a) * b;
}

__device__ void backward_one(float a, float b, float g, float& da, float& db) {
  const float s = sigmoid(a);
  db = g * a * s;
  da = g * b * s * (1.0f + a * (1.0f - s));
}

// Where element k of the (rows, width) output has its gate and up (and their gradients): row
// k / width, column k % width, in rows `ld` apart. The elementwise functions are one row
// (width = ld = n); packed rows (gate | up) have ld = 2 width, the up `width` after the gate.
struct row_layout {
  std::int64_t width, ld;
  __device__ std::int64_t at(std::int64_t k) const {
    return width == ld ? k : k / width * ld + k % width;
  }
};

// vector: 16 bytes a thread, the layout's width and ld in packs (every buffer 16-byte aligned);
// the elements past the last whole pack (one row only) one by one.
template <class T>
__global__ void forward_kernel(const T* gate, const T* up, T* out, std::int64_t n, row_layout rows,
                               bool vector) {
  constexpr int kLanes = pack<T>::kLanes;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vector) {
    const std::int64_t packs = n / kLanes;
    const row_layout in_packs{rows.width / kLanes, rows.ld / kLanes};
    const auto* a_p = reinterpret_cast<const pack<T>*>(gate);
    const auto* b_p = reinterpret_cast<const pack<T>*>(up);
    auto* y_p = reinterpret_cast<pack<T>*>(out);
    for (std::int64_t v = i; v < packs; v += stride) {
      const auto at = in_packs.at(v);
      const pack<T> a = a_p[at], b = b_p[at];
      pack<T> y;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) store(y.v[l], forward_one(load(a.v[l]), load(b.v[l])));
      y_p[v] = y;
    }
    done = packs * kLanes;
  }
  for (std::int64_t k = done + i; k < n; k += stride) {
    const auto at = rows.at(k);
    store(out[k], forward_one(load(gate[at]), load(up[at])));
  }
}

template <class T>
__global__ void backward_kernel(const T* gate, const T* up, const T* grad_out, T* grad_gate,
                                T* grad_up, std::int64_t n, row_layout rows, bool vector) {
  constexpr int kLanes = pack<T>::kLanes;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  float da, db;
  if (vector) {
    const std::int64_t packs = n / kLanes;
    const row_layout in_packs{rows.width / kLanes, rows.ld / kLanes};
    const auto* a_p = reinterpret_cast<const pack<T>*>(gate);
    const auto* b_p = reinterpret_cast<const pack<T>*>(up);
    const auto* g_p = reinterpret_cast<const pack<T>*>(grad_out);
    auto* da_p = reinterpret_cast<pack<T>*>(grad_gate);
    auto* db_p = reinterpret_cast<pack<T>*>(grad_up);
    for (std::int64_t v = i; v < packs; v += stride) {
      const auto at = in_packs.at(v);
      const pack<T> a = a_p[at], b = b_p[at], g = g_p[v];
      pack<T> da_out, db_out;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        backward_one(load(a.v[l]), load(b.v[l]), load(g.v[l]), da, db);
        store(da_out.v[l], da);
        store(db_out.v[l], db);
      }
      da_p[at] = da_out;
      db_p[at] = db_out;
    }
    done = packs * kLanes;
  }
  for (std::int64_t k = done + i; k < n; k += stride) {
    const auto at = rows.at(k);
    backward_one(load(gate[at]), load(up[at]), load(grad_out[k]), da, db);
    store(grad_gate[at], da);
    store(grad_up[at], db);
  }
}

template <class T>
unsigned blocks_for(std::int64_t n) {
  // enough blocks to fill an H100 several times over; the loop strides over the rest
  const std::int64_t wanted = (n / pack<T>::kLanes + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(wanted, 132 * 16)));
}

// n elements over rows (n / rows.width of them): vector where every buffer is 16-byte aligned
// and, for several rows, each row is whole packs.
template <class T>
void launch_forward(const T* gate, const T* up, T* out, std::int64_t n, row_layout rows,
                    void* stream) {
  if (n <= 0) return;
  const bool vector = aligned16(gate) && aligned16(up) && aligned16(out) &&
                      (rows.width == rows.ld || rows.width % pack<T>::kLanes == 0);
  forward_kernel<<<blocks_for<T>(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      gate, up, out, n, rows, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(const T* gate, const T* up, const T* grad_out, T* grad_gate, T* grad_up,
                     std::int64_t n, row_layout rows, void* stream) {
  if (n <= 0) return;
  const bool vector = aligned16(gate) && aligned16(up) && aligned16(grad_out) &&
                      aligned16(grad_gate) && aligned16(grad_up) &&
                      (rows.width == rows.ld || rows.width % pack<T>::kLanes == 0);
  backward_kernel<<<blocks_for<T>(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      gate, up, grad_out, grad_gate, grad_up, n, rows, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_rows_forward(const T* gate_up, T* out, std::int64_t rows, std::int64_t width,
                         void* stream) {
  launch_forward(gate_up, gate_up + width, out, rows * width, row_layout{width, 2 * width}, stream);
}

template <class T>
void launch_rows_backward(const T* gate_up, const T* grad_out, T* grad_gate_up, std::int64_t rows,
                          std::int64_t width, void* stream) {
  launch_backward(gate_up, gate_up + width, grad_out, grad_gate_up, grad_gate_up + width,
                  rows * width, row_layout{width, 2 * width}, stream);
}

}  // namespace

void swiglu_forward(const float* gate, const float* up, float* out, std::int64_t n, void* stream) {
  launch_forward(gate, up, out, n, row_layout{n, n}, stream);
}

void swiglu_backward(const float* gate, const float* up, const float* grad_out, float* grad_gate,
                     float* grad_up, std::int64_t n, void* stream) {
  launch_backward(gate, up, grad_out, grad_gate, grad_up, n, row_layout{n, n}, stream);
}

void swiglu_forward(const bf16* gate, const bf16* up, bf16* out, std::int64_t n, void* stream) {
  launch_forward(device_type(gate), device_type(up), device_type(out), n, row_layout{n, n}, stream);
}

void swiglu_backward(const bf16* gate, const bf16* up, const bf16* grad_out, bf16* grad_gate,
                     bf16* grad_up, std::int64_t n, void* stream) {
  launch_backward(device_type(gate), device_type(up), device_type(grad_out), device_type(grad_gate),
                  device_type(grad_up), n, row_layout{n, n}, stream);
}

void swiglu_rows_forward(const float* gate_up, float* out, std::int64_t rows, std::int64_t width,
                         void* stream) {
  launch_rows_forward(gate_up, out, rows, width, stream);
}

void swiglu_rows_backward(const float* gate_up, const float* grad_out, float* grad_gate_up,
                          std::int64_t rows, std::int64_t width, void* stream) {
  launch_rows_backward(gate_up, grad_out, grad_gate_up, rows, width, stream);
}

void swiglu_rows_forward(const bf16* gate_up, bf16* out, std::int64_t rows, std::int64_t width,
                         void* stream) {
  launch_rows_forward(device_type(gate_up), device_type(out), rows, width, stream);
}

void swiglu_rows_backward(const bf16* gate_up, const bf16* grad_out, bf16* grad_gate_up,
                          std::int64_t rows, std::int64_t width, void* stream) {
  launch_rows_backward(device_type(gate_up), device_type(grad_out), device_type(grad_gate_up), rows,
                       width, stream);
}

}  // namespace muster::kernels::cuda

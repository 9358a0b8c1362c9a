// RMSNorm on the GPU: see muster/kernels/rms_norm.hpp. One warp a row, forward and backward:
// a pass over the row for its sum (of x^2; of grad_y * w * x) as a warp reduction, then a
// second for the outputs, which finds the row in L1 (4096 floats are 16 KB). 16 bytes a lane
// where the rows' buffers are 16-byte aligned and dim is a multiple of 4, else a float a lane.
// The weight's gradient takes two more kernels: sums over blocks of rows, a thread a column
// (a warp reads 32 consecutive floats of a row), then those sums added in block order into
// grad_w, so its bits do not depend on the order blocks run in. The arithmetic is the CPU's
// (kernels/cpu/rms_norm.cpp), summed in another order. Each kernel is built for fp32 rows and
// for bf16 rows (x, grad_x; 8 bytes a lane) with an fp32 weight, where the normalised row is
// rounded to bf16 before the weight (rounded_as).
#include <algorithm>
#include <cstdint>

#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/float_chunks.cuh"
#include "muster/kernels/rms_norm.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
constexpr std::int64_t kMaxRowGrid = 1 << 20;  // blocks of the row kernels; they stride past it
constexpr int kColumnThreads = 256;            // a block of the weight gradient's sums
constexpr std::int64_t kBlockRows = 64;        // rows a sum takes, at least...
constexpr std::int64_t kMaxRowBlocks = 512;    // ...and at most this many sums a column

// Calls row(r) for each row this warp takes: its own, then a grid's warps apart.
template <class Row>
__device__ void each_row(std::int64_t rows, const Row& row) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t r =
           static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
       r < rows; r += warps)
    row(r);
}

// v as x's element type holds it: v itself for fp32, v rounded to nearest even for bf16
template <class TX>
__device__ __forceinline__ float rounded_as(float v) {
  if constexpr (std::is_same_v<TX, __nv_bfloat16>) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

template <int kWidth, class TX>
__global__ void forward_kernel(const TX* x, const float* w, float eps, std::int64_t rows,
                               std::int64_t dim, float* y, float* rstd) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  each_row(rows, [&](std::int64_t r) {
    const TX* xr = x + r * dim;
    float squares = 0;
    for (std::int64_t j = std::int64_t{lane} * kWidth; j < dim; j += kWarp * kWidth) {
      float xv[kWidth];
      load_chunk<kWidth>(xr + j, xv);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) squares += xv[i] * xv[i];
    }
    const float s = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(dim) + eps);
    if (lane == 0) rstd[r] = s;
    float* yr = y + r * dim;
    for (std::int64_t j = std::int64_t{lane} * kWidth; j < dim; j += kWarp * kWidth) {
      float xv[kWidth], wv[kWidth], out[kWidth];
      load_chunk<kWidth>(xr + j, xv);
      load_chunk<kWidth>(w + j, wv);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) out[i] = wv[i] * rounded_as<TX>(xv[i] * s);
      store_chunk<kWidth>(yr + j, out);
    }
  });
}

// grad_x = s (g w - x s mean), mean = s sum(g w x) / dim, per row
template <int kWidth, class TX>
__global__ void grad_x_kernel(const TX* x, const float* w, const float* rstd,
                              const float* grad_y, std::int64_t rows, std::int64_t dim,
                              TX* grad_x) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  each_row(rows, [&](std::int64_t r) {
    const TX* xr = x + r * dim;
    const float* gr = grad_y + r * dim;
    float dot = 0;
    for (std::int64_t j = std::int64_t{lane} * kWidth; j < dim; j += kWarp * kWidth) {
      float xv[kWidth], wv[kWidth], gv[kWidth];
      load_chunk<kWidth>(xr + j, xv);
      load_chunk<kWidth>(w + j, wv);
      load_chunk<kWidth>(gr + j, gv);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) dot += gv[i] * wv[i] * xv[i];
    }
    const float s = rstd[r];
    const float mean = s * warp_sum(dot) / static_cast<float>(dim);
    TX* dxr = grad_x + r * dim;
    for (std::int64_t j = std::int64_t{lane} * kWidth; j < dim; j += kWarp * kWidth) {
      float xv[kWidth], wv[kWidth], gv[kWidth], dx[kWidth];
      load_chunk<kWidth>(xr + j, xv);
      load_chunk<kWidth>(w + j, wv);
      load_chunk<kWidth>(gr + j, gv);
#pragma unroll
      for (int i = 0; i < kWidth; ++i) dx[i] = s * (gv[i] * wv[i] - xv[i] * s * mean);
      store_chunk<kWidth>(dxr + j, dx);
    }
  });
}

// partials[b][j] = the sum over block b's rows of grad_y * (x * rstd as TX) at column j
template <class TX>
__global__ void grad_w_partials_kernel(const TX* x, const float* rstd, const float* grad_y,
                                       std::int64_t rows, std::int64_t dim, std::int64_t block_rows,
                                       float* partials) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (j >= dim) return;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * block_rows;
  const std::int64_t end = begin + block_rows < rows ? begin + block_rows : rows;
  float sum = 0;
#pragma unroll 4
  for (std::int64_t r = begin; r < end; ++r)
    sum += grad_y[r * dim + j] * rounded_as<TX>(load(x[r * dim + j]) * rstd[r]);
  partials[static_cast<std::int64_t>(blockIdx.y) * dim + j] = sum;
}

__global__ void grad_w_sum_kernel(const float* partials, std::int64_t blocks, std::int64_t dim,
                                  float* grad_w) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (j >= dim) return;
  float sum = 0;
  for (std::int64_t b = 0; b < blocks; ++b) sum += partials[b * dim + j];
  grad_w[j] += sum;
}

// The weight gradient's blocks of rows: at least kBlockRows rows each, at most kMaxRowBlocks.
std::int64_t row_blocks(std::int64_t rows) {
  return std::clamp<std::int64_t>((rows + kBlockRows - 1) / kBlockRows, 1, kMaxRowBlocks);
}

unsigned row_grid(std::int64_t rows) {
  return static_cast<unsigned>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxRowGrid));
}

unsigned column_grid(std::int64_t dim) {
  return static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads);
}

// Whether the rows move 4 elements a lane at once: dim a multiple of 4, the fp32 buffers on 16
// bytes and x's (and grad_x's) on 4 of its elements.
template <class TX>
bool chunked(std::int64_t dim, const TX* x, const TX* grad_x,
             std::initializer_list<const void*> floats) {
  const auto on = [](const void* p) {
    return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(TX)) == 0;
  };
  return rows_in_chunks(4, dim, floats) && on(x) && on(grad_x);
}

template <class TX>
void forward(const TX* x, const float* w, float eps, std::int64_t rows, std::int64_t dim, float* y,
             float* rstd, void* stream) {
  if (rows == 0 || dim == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = row_grid(rows), block = kWarpsPerBlock * kWarp;
  if (chunked<TX>(dim, x, nullptr, {w, y}))
    forward_kernel<4><<<grid, block, 0, s>>>(x, w, eps, rows, dim, y, rstd);
  else
    forward_kernel<1><<<grid, block, 0, s>>>(x, w, eps, rows, dim, y, rstd);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

template <class TX>
void backward(const TX* x, const float* w, const float* rstd, const float* grad_y,
              std::int64_t rows, std::int64_t dim, TX* grad_x, float* grad_w, float* partials,
              void* stream) {
  if (rows == 0 || dim == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = row_grid(rows), block = kWarpsPerBlock * kWarp;
  if (chunked<TX>(dim, x, grad_x, {w, grad_y}))
    grad_x_kernel<4><<<grid, block, 0, s>>>(x, w, rstd, grad_y, rows, dim, grad_x);
  else
    grad_x_kernel<1><<<grid, block, 0, s>>>(x, w, rstd, grad_y, rows, dim, grad_x);
  MUSTER_CUDA_CHECK(cudaGetLastError());
  const auto blocks = row_blocks(rows);
  const auto block_rows = (rows + blocks - 1) / blocks;
  grad_w_partials_kernel<<<dim3(column_grid(dim), static_cast<unsigned>(blocks)), kColumnThreads, 0,
                           s>>>(x, rstd, grad_y, rows, dim, block_rows, partials);
  MUSTER_CUDA_CHECK(cudaGetLastError());
  grad_w_sum_kernel<<<column_grid(dim), kColumnThreads, 0, s>>>(partials, blocks, dim, grad_w);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rms_norm_forward(const float* x, const float* w, float eps, std::int64_t rows,
                      std::int64_t dim, float* y, float* rstd, void* stream) {
  forward(x, w, eps, rows, dim, y, rstd, stream);
}

void rms_norm_forward(const bf16* x, const float* w, float eps, std::int64_t rows,
                      std::int64_t dim, float* y, float* rstd, void* stream) {
  forward(device_type(x), w, eps, rows, dim, y, rstd, stream);
}

std::int64_t rms_norm_backward_partials(std::int64_t rows, std::int64_t dim) {
  return row_blocks(rows) * dim;
}

void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, float* grad_x, float* grad_w,
                       float* partials, void* stream) {
  backward(x, w, rstd, grad_y, rows, dim, grad_x, grad_w, partials, stream);
}

void rms_norm_backward(const bf16* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, bf16* grad_x, float* grad_w,
                       float* partials, void* stream) {
  backward(device_type(x), w, rstd, grad_y, rows, dim, device_type(grad_x), grad_w, partials,
           stream);
}

}  // namespace muster::kernels::cuda

// The optimizer's loops on the GPU: see muster/kernels/optimizer.hpp. The AdamW update is one
// grid-stride pass (four elements a thread through float4 when every buffer is 16-byte aligned,
// the tail one by one) with the CPU kernel's fp32 arithmetic. The sum of squares is two
// launches: a fixed number of blocks, each summing its stride in fp64 and reducing in shared
// memory, then one block adding the blocks' sums in a fixed tree, so a given buffer gives the
// same bits every time.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/optimizer.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSumBlocks = static_cast<int>(kSumOfSquaresScratch - 1);
static_assert(kSumBlocks == 1024, "the final reduction is one block of kSumBlocks threads");

struct adamw_constants {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, sqrt_bias2, step_size, decay;
};

__device__ float adamw_one(const adamw_constants& c, float p, float g, float& m, float& v,
                           float keep) {
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + c.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / c.sqrt_bias2 + c.eps;
  return p * keep + -c.step_size * (m / denom);
}

__global__ void adamw_kernel(adamw_constants c, float* param, const float* grad, float* exp_avg,
                             float* exp_avg_sq, const float* mask, std::int64_t n, bool vector) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool decays = mask != nullptr && c.decay != 0.0f;
  std::int64_t done = 0;
  if (vector) {
    const std::int64_t n4 = n / 4;
    auto* p4 = reinterpret_cast<float4*>(param);
    const auto* g4 = reinterpret_cast<const float4*>(grad);
    auto* m4 = reinterpret_cast<float4*>(exp_avg);
    auto* v4 = reinterpret_cast<float4*>(exp_avg_sq);
    const auto* k4 = reinterpret_cast<const float4*>(mask);
    for (std::int64_t i = first; i < n4; i += stride) {
      float4 p = p4[i], m = m4[i], v = v4[i];
      const float4 g = g4[i];
      const float4 d = decays ? k4[i] : make_float4(0, 0, 0, 0);
      p.x = adamw_one(c, p.x, g.x, m.x, v.x, 1.0f - c.decay * d.x);
      p.y = adamw_one(c, p.y, g.y, m.y, v.y, 1.0f - c.decay * d.y);
      p.z = adamw_one(c, p.z, g.z, m.z, v.z, 1.0f - c.decay * d.z);
      p.w = adamw_one(c, p.w, g.w, m.w, v.w, 1.0f - c.decay * d.w);
      p4[i] = p;
      m4[i] = m;
      v4[i] = v;
    }
    done = n4 * 4;
  }
  for (std::int64_t i = done + first; i < n; i += stride) {
    const float keep = decays ? 1.0f - c.decay * mask[i] : 1.0f;
    param[i] = adamw_one(c, param[i], grad[i], exp_avg[i], exp_avg_sq[i], keep);
  }
}

// Block-wide sum of one double a thread (blockDim.x a power of two), in a fixed tree.
__device__ double block_sum(double mine, double* shared) {
  shared[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void squares_kernel(const float* x, std::int64_t n, double* partial) {
  __shared__ double shared[kThreads];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double v = x[i];
    sum += v * v;
  }
  const double total = block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void partials_kernel(double* partial, int count) {
  __shared__ double shared[kSumBlocks];
  const double total =
      block_sum(static_cast<int>(threadIdx.x) < count ? partial[threadIdx.x] : 0.0, shared);
  if (threadIdx.x == 0) partial[kSumBlocks] = total;
}

bool aligned16(const void* p) {
  return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

unsigned blocks_for(std::int64_t items, std::int64_t most) {
  return static_cast<unsigned>(
      std::max<std::int64_t>(1, std::min<std::int64_t>(most, (items + kThreads - 1) / kThreads)));
}

}  // namespace

void adamw_update(const adamw_scalars& s, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, const float* decay_mask, std::int64_t n, void* stream) {
  if (n <= 0) return;
  adamw_constants c{};
  c.beta1 = float(s.beta1);
  c.beta2 = float(s.beta2);
  c.one_minus_beta1 = float(1 - s.beta1);
  c.one_minus_beta2 = float(1 - s.beta2);
  c.eps = float(s.eps);
  c.sqrt_bias2 = float(std::sqrt(1 - std::pow(s.beta2, double(s.step))));
  c.step_size = float(s.lr / (1 - std::pow(s.beta1, double(s.step))));
  c.decay = float(s.lr * s.weight_decay);
  const bool vector = aligned16(param) && aligned16(grad) && aligned16(exp_avg) &&
                      aligned16(exp_avg_sq) && aligned16(decay_mask);
  // enough blocks to fill an H100 several times over; the loop strides over the rest
  adamw_kernel<<<blocks_for(vector ? (n + 3) / 4 : n, 132 * 16), kThreads, 0,
                 static_cast<cudaStream_t>(stream)>>>(c, param, grad, exp_avg, exp_avg_sq,
                                                      decay_mask, n, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void sum_of_squares(const float* x, std::int64_t n, double* scratch, void* stream) {
  const auto blocks = blocks_for(n, kSumBlocks);
  auto* s = static_cast<cudaStream_t>(stream);
  squares_kernel<<<blocks, kThreads, 0, s>>>(x, std::max<std::int64_t>(n, 0), scratch);
  MUSTER_CUDA_CHECK(cudaGetLastError());
  partials_kernel<<<1, kSumBlocks, 0, s>>>(scratch, static_cast<int>(blocks));
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

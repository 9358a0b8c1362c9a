// Token permutation on the GPU: see muster/kernels/permute.hpp.
// The index is a stable counting sort in three kernels over chunks of kChunk assignments:
// each chunk's per-expert counts (scratch), the counts' prefix over chunks and experts, then
// each assignment's row = its expert's first row + the expert's rows in earlier chunks + the
// same expert's assignments earlier in its chunk. Rows are copied and combined one block per
// row or token, the threads across the hidden size.
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/permute.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kChunk = 256;
constexpr int kThreads = 256;

std::int64_t num_chunks(const permute_shape& s) {
  return (s.num_tokens * s.topk + kChunk - 1) / kChunk;
}

__device__ bool kept(std::int64_t e, std::int64_t num_experts) {
  return e >= 0 && e < num_experts;
}

// hist[c * E + e]: expert e's assignments in chunk c.
__global__ void chunk_counts(const std::int64_t* experts, std::int64_t n, std::int64_t num_experts,
                             int* hist) {
  const std::int64_t a = static_cast<std::int64_t>(blockIdx.x) * kChunk + threadIdx.x;
  if (a < n && kept(experts[a], num_experts))
    atomicAdd(&hist[static_cast<std::int64_t>(blockIdx.x) * num_experts + experts[a]], 1);
}

// Per expert (one thread each): counts[e], and hist's column turned into its exclusive prefix
// over the chunks.
__global__ void column_prefix(int* hist, std::int64_t chunks, std::int64_t num_experts,
                              std::int64_t* counts) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= num_experts) return;
  int sum = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const int here = hist[c * num_experts + e];
    hist[c * num_experts + e] = sum;
    sum += here;
  }
  counts[e] = sum;
}

// offsets = exclusive scan of counts, by one block (the experts in slices of its threads).
__global__ void scan_offsets(const std::int64_t* counts, std::int64_t num_experts,
                             std::int64_t* offsets) {
  __shared__ std::int64_t part[kThreads];
  std::int64_t carry = 0;
  for (std::int64_t base = 0; base < num_experts; base += kThreads) {
    const std::int64_t e = base + threadIdx.x;
    part[threadIdx.x] = e < num_experts ? counts[e] : 0;
    __syncthreads();
    for (int step = 1; step < kThreads; step *= 2) {  // inclusive Hillis-Steele scan
      const std::int64_t add = threadIdx.x >= step ? part[threadIdx.x - step] : 0;
      __syncthreads();
      part[threadIdx.x] += add;
      __syncthreads();
    }
    if (e < num_experts) offsets[e + 1] = carry + part[threadIdx.x];
    carry += part[kThreads - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) offsets[0] = 0;
}

__global__ void place(const std::int64_t* experts, std::int64_t n, std::int64_t num_experts,
                      const int* hist, const std::int64_t* offsets, std::int64_t* row_of,
                      std::int64_t* source_of) {
  __shared__ std::int64_t chunk[kChunk];
  const std::int64_t a = static_cast<std::int64_t>(blockIdx.x) * kChunk + threadIdx.x;
  chunk[threadIdx.x] = a < n ? experts[a] : -1;
  __syncthreads();
  if (a >= n) return;
  const std::int64_t e = chunk[threadIdx.x];
  if (!kept(e, num_experts)) {
    row_of[a] = -1;
    return;
  }
  int before = 0;
  for (unsigned i = 0; i < threadIdx.x; ++i) before += chunk[i] == e;
  const std::int64_t row =
      offsets[e] + hist[static_cast<std::int64_t>(blockIdx.x) * num_experts + e] + before;
  row_of[a] = row;
  source_of[row] = a;
}

__global__ void gather_rows(const float* x, const std::int64_t* source_of, std::int64_t hidden,
                            int topk, float* out) {
  const std::int64_t r = blockIdx.x;
  const float* in = x + (source_of[r] / topk) * hidden;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) out[r * hidden + i] = in[i];
}

__global__ void combine_rows(const float* rows, const std::int64_t* row_of, const float* weights,
                             std::int64_t hidden, int topk, float* y) {
  const std::int64_t t = blockIdx.x;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float sum = 0;
    for (int j = 0; j < topk; ++j) {
      const std::int64_t a = t * topk + j, row = row_of[a];
      if (row >= 0) sum += (weights ? weights[a] : 1.0f) * rows[row * hidden + i];
    }
    y[t * hidden + i] = sum;
  }
}

__global__ void combine_backward(const float* rows, const std::int64_t* row_of,
                                 const float* weights, const float* grad_y, std::int64_t hidden,
                                 int topk, float* grad_rows, float* grad_weights) {
  __shared__ float part[kThreads];
  const std::int64_t a = blockIdx.x, row = row_of[a];
  const float* g = grad_y + (a / topk) * hidden;
  if (row < 0) {
    if (grad_weights && threadIdx.x == 0) grad_weights[a] = 0.0f;
    return;
  }
  const float w = weights ? weights[a] : 1.0f;
  float dot = 0;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    grad_rows[row * hidden + i] = w * g[i];
    if (grad_weights) dot += g[i] * rows[row * hidden + i];
  }
  if (!grad_weights) return;
  part[threadIdx.x] = dot;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) grad_weights[a] = part[0];
}

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

}  // namespace

std::int64_t permute_index_scratch_bytes(const permute_shape& s) {
  check_permute_shape(s);
  return num_chunks(s) * s.num_experts * static_cast<std::int64_t>(sizeof(int));
}

void permute_index(const std::int64_t* experts, std::int64_t* counts, std::int64_t* offsets,
                   std::int64_t* row_of, std::int64_t* source_of, void* scratch,
                   const permute_shape& s, void* stream) {
  check_permute_shape(s);
  const auto n = s.num_tokens * s.topk;
  const auto chunks = num_chunks(s);
  auto* hist = static_cast<int*>(scratch);
  auto st = as_stream(stream);
  MUSTER_CUDA_CHECK(cudaMemsetAsync(hist, 0, std::size_t(permute_index_scratch_bytes(s)), st));
  if (chunks > 0) {
    chunk_counts<<<unsigned(chunks), kChunk, 0, st>>>(experts, n, s.num_experts, hist);
    MUSTER_CUDA_CHECK(cudaGetLastError());
  }
  column_prefix<<<unsigned((s.num_experts + kThreads - 1) / kThreads), kThreads, 0, st>>>(
      hist, chunks, s.num_experts, counts);
  MUSTER_CUDA_CHECK(cudaGetLastError());
  scan_offsets<<<1, kThreads, 0, st>>>(counts, s.num_experts, offsets);
  MUSTER_CUDA_CHECK(cudaGetLastError());
  if (chunks > 0) {
    place<<<unsigned(chunks), kChunk, 0, st>>>(experts, n, s.num_experts, hist, offsets, row_of,
                                               source_of);
    MUSTER_CUDA_CHECK(cudaGetLastError());
  }
}

void permute_rows(const float* x, const std::int64_t* source_of, std::int64_t num_rows, float* out,
                  const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (num_rows == 0) return;
  gather_rows<<<unsigned(num_rows), kThreads, 0, as_stream(stream)>>>(x, source_of, s.hidden,
                                                                      s.topk, out);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void unpermute(const float* rows, const std::int64_t* row_of, const float* weights, float* y,
               const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (s.num_tokens == 0) return;
  combine_rows<<<unsigned(s.num_tokens), kThreads, 0, as_stream(stream)>>>(rows, row_of, weights,
                                                                           s.hidden, s.topk, y);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void unpermute_backward(const float* rows, const std::int64_t* row_of, const float* weights,
                        const float* grad_y, float* grad_rows, float* grad_weights,
                        const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (s.num_tokens == 0) return;
  combine_backward<<<unsigned(s.num_tokens * s.topk), kThreads, 0, as_stream(stream)>>>(
      rows, row_of, weights, grad_y, s.hidden, s.topk, grad_rows, grad_weights);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

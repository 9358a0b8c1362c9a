// Token permutation on the GPU: see muster/kernels/permute.hpp.
// The index is a stable counting sort in three kernels over chunks of kChunk assignments:
// each chunk's per-expert counts (scratch), the counts' prefix over chunks and experts, then
// each assignment's row = its expert's first row + the expert's rows in earlier chunks + the
// same expert's assignments earlier in its chunk. Rows are copied and combined one block per
// row or token, the threads across the hidden size, 16 bytes at a time where the rows' size and
// alignment allow; fp32 and bf16 rows, fp32 sums.
#include <cstdint>

#include <initializer_list>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/element_access.cuh"
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

// One block a row; 16 bytes a thread when the rows allow it (any element type: a copy).
template <class T>
__global__ void gather_rows(const T* x, const std::int64_t* source_of, std::int64_t hidden,
                            int topk, T* out, bool vector) {
  const std::int64_t r = blockIdx.x;
  const T* in = x + (source_of[r] / topk) * hidden;
  T* to = out + r * hidden;
  if (vector) {
    const auto* in16 = reinterpret_cast<const uint4*>(in);
    auto* to16 = reinterpret_cast<uint4*>(to);
    const std::int64_t n16 = hidden * std::int64_t(sizeof(T)) / 16;
    for (std::int64_t i = threadIdx.x; i < n16; i += blockDim.x) to16[i] = in16[i];
    return;
  }
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) to[i] = in[i];
}

// One block a token: y[t] = sum over its kept assignments of weight * row, in fp32; a pack of
// elements a thread when `vector`.
template <class T>
__global__ void combine_rows(const T* rows, const std::int64_t* row_of, const float* weights,
                             std::int64_t hidden, int topk, T* y, bool vector) {
  const std::int64_t t = blockIdx.x;
  if (vector) {
    constexpr int kLanes = pack<T>::kLanes;
    const std::int64_t packs = hidden / kLanes;
    auto* out = reinterpret_cast<pack<T>*>(y + t * hidden);
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      float sum[kLanes] = {};
      for (int j = 0; j < topk; ++j) {
        const std::int64_t a = t * topk + j, row = row_of[a];
        if (row < 0) continue;
        const float w = weights ? weights[a] : 1.0f;
        const pack<T> in = reinterpret_cast<const pack<T>*>(rows + row * hidden)[p];
#pragma unroll
        for (int l = 0; l < kLanes; ++l) sum[l] += w * load(in.v[l]);
      }
      pack<T> o;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) store(o.v[l], sum[l]);
      out[p] = o;
    }
    return;
  }
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float sum = 0;
    for (int j = 0; j < topk; ++j) {
      const std::int64_t a = t * topk + j, row = row_of[a];
      if (row >= 0) sum += (weights ? weights[a] : 1.0f) * load(rows[row * hidden + i]);
    }
    store(y[t * hidden + i], sum);
  }
}

// The block's sum of `v` (blockDim.x == kThreads), in thread 0.
__device__ float block_sum(float v) {
  __shared__ float part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  return part[0];
}

// One block an assignment: grad_rows[row] = w * grad_y[token], and the weight's gradient
// dot(grad_y[token], rows[row]) in fp32.
template <class T>
__global__ void combine_backward(const T* rows, const std::int64_t* row_of, const float* weights,
                                 const T* grad_y, std::int64_t hidden, int topk, T* grad_rows,
                                 float* grad_weights, bool vector) {
  const std::int64_t a = blockIdx.x, row = row_of[a];
  const T* g = grad_y + (a / topk) * hidden;
  if (row < 0) {
    if (grad_weights && threadIdx.x == 0) grad_weights[a] = 0.0f;
    return;
  }
  const float w = weights ? weights[a] : 1.0f;
  const T* in = rows + row * hidden;
  T* out = grad_rows + row * hidden;
  float dot = 0;
  if (vector) {
    constexpr int kLanes = pack<T>::kLanes;
    const std::int64_t packs = hidden / kLanes;
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const pack<T> gp = reinterpret_cast<const pack<T>*>(g)[p];
      pack<T> o;
#pragma unroll
      for (int l = 0; l < kLanes; ++l) store(o.v[l], w * load(gp.v[l]));
      reinterpret_cast<pack<T>*>(out)[p] = o;
      if (!grad_weights) continue;
      const pack<T> r = reinterpret_cast<const pack<T>*>(in)[p];
#pragma unroll
      for (int l = 0; l < kLanes; ++l) dot += load(gp.v[l]) * load(r.v[l]);
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float gi = load(g[i]);
      store(out[i], w * gi);
      if (grad_weights) dot += gi * load(in[i]);
    }
  }
  if (!grad_weights) return;
  const float sum = block_sum(dot);
  if (threadIdx.x == 0) grad_weights[a] = sum;
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

namespace {

// Whether rows of `hidden` elements at these pointers can be read in 16-byte packs.
template <class T>
bool rows_in_packs(std::int64_t hidden, std::initializer_list<const void*> buffers) {
  if (hidden % pack<T>::kLanes != 0) return false;
  for (const void* b : buffers)
    if (b && !aligned16(b)) return false;
  return true;
}

template <class T>
void launch_permute_rows(const T* x, const std::int64_t* source_of, std::int64_t num_rows, T* out,
                         const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (num_rows == 0) return;
  const bool vector = (s.hidden * std::int64_t(sizeof(T))) % 16 == 0 && aligned16(x) &&
                      aligned16(out);
  gather_rows<<<unsigned(num_rows), kThreads, 0, as_stream(stream)>>>(x, source_of, s.hidden,
                                                                      s.topk, out, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_unpermute(const T* rows, const std::int64_t* row_of, const float* weights, T* y,
                      const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (s.num_tokens == 0) return;
  const bool vector = rows_in_packs<T>(s.hidden, {rows, y});
  combine_rows<<<unsigned(s.num_tokens), kThreads, 0, as_stream(stream)>>>(
      rows, row_of, weights, s.hidden, s.topk, y, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_unpermute_backward(const T* rows, const std::int64_t* row_of, const float* weights,
                               const T* grad_y, T* grad_rows, float* grad_weights,
                               const permute_shape& s, void* stream) {
  check_permute_shape(s);
  if (s.num_tokens == 0) return;
  const bool vector = rows_in_packs<T>(s.hidden, {rows, grad_y, grad_rows});
  combine_backward<<<unsigned(s.num_tokens * s.topk), kThreads, 0, as_stream(stream)>>>(
      rows, row_of, weights, grad_y, s.hidden, s.topk, grad_rows, grad_weights, vector);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void permute_rows(const float* x, const std::int64_t* source_of, std::int64_t num_rows, float* out,
                  const permute_shape& s, void* stream) {
  launch_permute_rows(x, source_of, num_rows, out, s, stream);
}

void unpermute(const float* rows, const std::int64_t* row_of, const float* weights, float* y,
               const permute_shape& s, void* stream) {
  launch_unpermute(rows, row_of, weights, y, s, stream);
}

void unpermute_backward(const float* rows, const std::int64_t* row_of, const float* weights,
                        const float* grad_y, float* grad_rows, float* grad_weights,
                        const permute_shape& s, void* stream) {
  launch_unpermute_backward(rows, row_of, weights, grad_y, grad_rows, grad_weights, s, stream);
}

void permute_rows(const bf16* x, const std::int64_t* source_of, std::int64_t num_rows, bf16* out,
                  const permute_shape& s, void* stream) {
  launch_permute_rows(device_type(x), source_of, num_rows, device_type(out), s, stream);
}

void unpermute(const bf16* rows, const std::int64_t* row_of, const float* weights, bf16* y,
               const permute_shape& s, void* stream) {
  launch_unpermute(device_type(rows), row_of, weights, device_type(y), s, stream);
}

void unpermute_backward(const bf16* rows, const std::int64_t* row_of, const float* weights,
                        const bf16* grad_y, bf16* grad_rows, float* grad_weights,
                        const permute_shape& s, void* stream) {
  launch_unpermute_backward(device_type(rows), row_of, weights, device_type(grad_y),
                            device_type(grad_rows), grad_weights, s, stream);
}

}  // namespace muster::kernels::cuda

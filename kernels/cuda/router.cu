// The MoE router on the GPU: see muster/kernels/router.hpp. One warp per token: each lane holds
// the logits of experts lane, lane + 32, ... in registers (kPer of them: the forward is built
// for 1, 2, 4, ... 32 per lane, up to 1024 experts, and runs the smallest that holds the
// experts, so 256 experts scan 8 registers a lane, not 32), the softmax's
// max and sum are warp reductions, and the top-k is k rounds of a warp arg-max (ties to the
// lower expert id); lane j ends with the j-th choice. The backward is one warp per token too.
//
// The arg-max works on keys: scores are >= 0 (softmax, sigmoid), so a score's bits order as an
// unsigned integer, and key = bits + 1 leaves 0 for an expert taken already. A round is then two
// warp reductions of integers, which sm_80 and later do in one instruction each (__reduce_max_sync,
// __reduce_min_sync), instead of five steps of two shuffles: the k rounds were the long serial part
// of a token's warp.
#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/router.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kPerLane = static_cast<int>(kRouterMaxExperts / kWarp);
constexpr int kWarpsPerBlock = 8;
constexpr float kTaken = -1.0f;  // below every score (softmax and sigmoid are >= 0)
constexpr unsigned kTakenKey = 0;

__device__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float warp_max(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The warp's largest (kMax) or smallest unsigned value: one instruction on sm_80 and later.
template <bool kMax>
__device__ unsigned warp_extreme(unsigned v) {
#if __CUDA_ARCH__ >= 800
  return kMax ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#else
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const unsigned other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? max(v, other) : min(v, other);
  }
  return v;
#endif
}

// A score's key: its bits + 1 (0 < score <= 1 fits); 1 for zero and for NaN (a NaN logit makes
// every softmax score NaN: the lowest experts are then chosen, never an id out of range);
// kTakenKey for kTaken (a lane past the last expert).
__device__ unsigned score_key(float score) {
  if (score > 0.0f) return __float_as_uint(score) + 1u;
  return score < 0.0f ? kTakenKey : 1u;
}

__device__ float key_score(unsigned key) {
  return key > 1u ? __uint_as_float(key - 1u) : (key == 1u ? 0.0f : kTaken);
}

template <int kPer>
__global__ void router_forward_kernel(const float* logits, float* scores, std::int64_t* experts,
                                      float* weights, std::int64_t num_tokens, int num_experts,
                                      int topk, bool sigmoid, bool renormalize) {
  const std::int64_t t =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (t >= num_tokens) return;  // the whole warp leaves together
  const float* x = logits + t * num_experts;
  float* p = scores + t * num_experts;
  float v[kPer];
  float top = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    v[i] = e < num_experts ? x[e] : -FLT_MAX;
    top = fmaxf(top, v[i]);
  }
  if (sigmoid) {
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      v[i] = lane + i * kWarp < num_experts ? 1.0f / (1.0f + __expf(-v[i])) : kTaken;
  } else {
    top = warp_max(top);
    float sum = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      v[i] = lane + i * kWarp < num_experts ? __expf(v[i] - top) : 0.0f;
      sum += v[i];
    }
    const float inv = 1.0f / warp_sum(sum);
#pragma unroll
    for (int i = 0; i < kPer; ++i) v[i] = lane + i * kWarp < num_experts ? v[i] * inv : kTaken;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + i * kWarp < num_experts) p[lane + i * kWarp] = v[i];

  unsigned key[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) key[i] = score_key(v[i]);  // kTaken (no expert): kTakenKey
  float mine = 0.0f;                                        // lane j < topk: the j-th choice
  int mine_expert = 0;
  for (int j = 0; j < topk; ++j) {
    unsigned best = kTakenKey;
    int best_expert = num_experts;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (key[i] > best) {  // ascending experts: the first of equals stays
        best = key[i];
        best_expert = lane + i * kWarp;
      }
    const unsigned top = warp_extreme<true>(best);
    const int chosen = static_cast<int>(
        warp_extreme<false>(best == top ? static_cast<unsigned>(best_expert) : UINT_MAX));
    if (lane == j) {
      mine = key_score(top);
      mine_expert = chosen;
    }
    if (chosen % kWarp == lane) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (i == chosen / kWarp) key[i] = kTakenKey;
    }
  }
  const float total = warp_sum(lane < topk ? mine : 0.0f);
  if (lane < topk) {
    experts[t * topk + lane] = mine_expert;
    weights[t * topk + lane] = renormalize ? mine / total : mine;
  }
}

__global__ void router_backward_kernel(const float* scores, const std::int64_t* experts,
                                       const float* grad_weights, const float* grad_scores,
                                       float* grad_logits, std::int64_t num_tokens, int num_experts,
                                       int topk, bool sigmoid, bool renormalize) {
  const std::int64_t t =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (t >= num_tokens) return;
  const float* p = scores + t * num_experts;
  float* dx = grad_logits + t * num_experts;
  const bool chooser = lane < topk;
  const int e = chooser ? static_cast<int>(experts[t * topk + lane]) : 0;
  const float pe = chooser ? p[e] : 0.0f;
  float g = chooser ? grad_weights[t * topk + lane] : 0.0f;  // becomes dL/dscore of e
  if (renormalize) {
    const float total = warp_sum(pe);
    const float dot = warp_sum(g * pe) / total;
    g = (g - dot) / total;
  }
  // dL/dscore: grad_scores (gs, when given) plus g at the chosen experts
  const float* gs = grad_scores ? grad_scores + t * num_experts : nullptr;
  const float gse = chooser && gs ? gs[e] : 0.0f;
  if (sigmoid) {
    for (int i = lane; i < num_experts; i += kWarp)
      dx[i] = gs ? gs[i] * p[i] * (1.0f - p[i]) : 0.0f;
    __syncwarp();
    if (chooser) dx[e] = (gse + g) * pe * (1.0f - pe);
  } else {
    float part = chooser ? pe * g : 0.0f;  // sum_m p_m dp_m: the weights' share...
    if (gs)
      for (int i = lane; i < num_experts; i += kWarp) part += p[i] * gs[i];  // ...the scores'
    const float dot = warp_sum(part);
    for (int i = lane; i < num_experts; i += kWarp) dx[i] = p[i] * ((gs ? gs[i] : 0.0f) - dot);
    __syncwarp();
    if (chooser) dx[e] = pe * (gse + g - dot);
  }
}

unsigned blocks_for(std::int64_t num_tokens) {
  return static_cast<unsigned>((num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void router_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& s, void* stream) {
  check_router_shape(s);
  if (s.num_tokens == 0) return;
  const auto launch = [&](auto kernel) {
    kernel<<<blocks_for(s.num_tokens), kWarpsPerBlock * kWarp, 0,
             static_cast<cudaStream_t>(stream)>>>(logits, scores, experts, weights, s.num_tokens,
                                                  static_cast<int>(s.num_experts), s.topk,
                                                  s.score == router_score::sigmoid, s.renormalize);
  };
  const auto per_lane = (s.num_experts + kWarp - 1) / kWarp;
  if (per_lane <= 1)
    launch(router_forward_kernel<1>);
  else if (per_lane <= 2)
    launch(router_forward_kernel<2>);
  else if (per_lane <= 4)
    launch(router_forward_kernel<4>);
  else if (per_lane <= 8)
    launch(router_forward_kernel<8>);
  else if (per_lane <= 16)
    launch(router_forward_kernel<16>);
  else
    launch(router_forward_kernel<kPerLane>);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void router_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& s,
                     void* stream) {
  check_router_shape(s);
  if (s.num_tokens == 0) return;
  router_backward_kernel<<<blocks_for(s.num_tokens), kWarpsPerBlock * kWarp, 0,
                           static_cast<cudaStream_t>(stream)>>>(
      scores, experts, grad_weights, grad_scores, grad_logits, s.num_tokens,
      static_cast<int>(s.num_experts), s.topk, s.score == router_score::sigmoid, s.renormalize);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

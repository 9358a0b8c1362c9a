// The MoE router on the GPU: see muster/kernels/router.hpp. One warp per token, each warp
// loading its next token's logits while it routes the current one. Each lane holds
// the logits of kPer experts in registers (the forward is built for 1, 2, 4, ... 32 per lane, up
// to 1024 experts, and runs the smallest that holds the experts, so 256 experts take 8
// registers a lane, not 32), in chunks of up to 4 consecutive experts, lane after lane, so a
// warp loads and stores a chunk as one contiguous run of 16 bytes a lane where the rows allow
// (router_lanes::expert_of). Each slot count is built twice: for any rows, and for aligned rows
// that fill every slot (row_slots' kFull: 32, 64, ... 1024 experts), which tests no slot
// against the expert count; there, at 128 and 256 experts, the forward stages each warp's next
// rows through shared memory with cp.async (each_token_staged), two in flight, where the
// registers hold one. The softmax's max and sum are warp reductions. The top-k keeps
// each lane's best two experts not yet chosen (router_lanes.hpp): a round is two integer warp
// reductions over those heads, which sm_80 and later do in one instruction each
// (__reduce_max_sync, __reduce_min_sync), and a pop by the lane chosen; lane j ends with the
// j-th choice. Ties go to the lower expert id. The backward is one warp per token too.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/float_chunks.cuh"
#include "kernels/cuda/router_lanes.hpp"
#include "muster/kernels/router.hpp"

namespace muster::kernels::cuda {
namespace {

using router_lanes::kNoKey;
using router_lanes::kWarp;
constexpr int kPerLane = static_cast<int>(kRouterMaxExperts / kWarp);
constexpr int kWarpsPerBlock = 8;
// The blocks of the forward for kPer slots a lane an SM must hold at once: 5, 40 warps, where
// 256 experts took 52 registers a thread without a bound (32 warps) and ptxas fits 46 without
// spilling; 1 (no bound) for more slots, and before sm_80 (an sm_75 SM holds 1024 threads).
// The backward has none: at 5 it spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
template <int kPer>
inline constexpr int kForwardMinBlocks = 1;
#else
template <int kPer>
inline constexpr int kForwardMinBlocks = kPer <= 8 ? 5 : 1;
#endif

// Whether the forward stages its rows through shared memory (each_token_staged): full rows of
// 128 or 256 experts (a ring of 3 rows a warp: 12 or 24 KB a block), on sm_80 and later.
template <int kPer, bool kFull>
inline constexpr bool kStagedOf = kFull && (kPer == 4 || kPer == 8);
constexpr float kNoScore = -1.0f;  // below every score (softmax and sigmoid are >= 0): kNoKey

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

// A warp's view of one row of kPer slots a lane. chunked: num_experts is a multiple of kWidth
// and the rows' pointers are aligned to kWidth floats, so a chunk is all experts or none and
// moves in one access. kFull: the row fills every slot (num_experts = 32 kPer, as 32, 64, 128,
// 256 experts do) and is chunked, which the compiler then knows: no test of a slot against
// num_experts and no branch around a chunk's access, about a fifth of the forward's instructions
// at 256 experts (PTX).
template <int kPer, bool kFull>
struct row_slots {
  static constexpr int kWidth = router_lanes::kWidthOf<kPer>;
  int lane;
  int num_experts;
  bool chunked_rows;

  __device__ int expert(int slot) const { return router_lanes::expert_of<kWidth>(lane, slot); }
  __device__ bool has(int slot) const { return kFull || expert(slot) < num_experts; }
  __device__ bool chunked() const { return kFull || chunked_rows; }

  __device__ void load(const float* row, float (&v)[kPer], float missing) const {
#pragma unroll
    for (int s = 0; s < kPer; s += kWidth) {
      if (chunked() && has(s)) {
        load_chunk<kWidth>(row + expert(s), v + s);
      } else {
#pragma unroll
        for (int i = 0; i < kWidth; ++i) v[s + i] = has(s + i) ? row[expert(s + i)] : missing;
      }
    }
  }

  __device__ void store(float* row, const float (&v)[kPer]) const {
#pragma unroll
    for (int s = 0; s < kPer; s += kWidth) {
      if (chunked()) {
        if (has(s)) store_chunk<kWidth>(row + expert(s), v + s);
      } else {
#pragma unroll
        for (int i = 0; i < kWidth; ++i)
          if (has(s + i)) row[expert(s + i)] = v[s + i];
      }
    }
  }
};

// One token: its logits v (in registers) become its scores, written to `scores`, and its
// top-k, written to experts and weights (topk of each).
template <int kPer, bool kFull>
__device__ void route_token(const row_slots<kPer, kFull>& row, float (&v)[kPer], float* scores,
                            std::int64_t* experts, float* weights, int topk, bool sigmoid,
                            bool renormalize) {
  if (sigmoid) {
#pragma unroll
    for (int s = 0; s < kPer; ++s) v[s] = row.has(s) ? 1.0f / (1.0f + __expf(-v[s])) : kNoScore;
  } else {
    float top = -FLT_MAX;
#pragma unroll
    for (int s = 0; s < kPer; ++s) top = fmaxf(top, v[s]);
    top = warp_max(top);
    float sum = 0;
#pragma unroll
    for (int s = 0; s < kPer; ++s) {
      v[s] = row.has(s) ? __expf(v[s] - top) : 0.0f;
      sum += v[s];
    }
    const float inv = 1.0f / warp_sum(sum);
#pragma unroll
    for (int s = 0; s < kPer; ++s) v[s] = row.has(s) ? v[s] * inv : kNoScore;
  }
  row.store(scores, v);

  unsigned key[kPer];
#pragma unroll
  for (int s = 0; s < kPer; ++s) key[s] = router_lanes::score_key(v[s]);  // kNoScore: kNoKey
  const int lane = row.lane;
  router_lanes::lane_head head;
  router_lanes::fill<true>(head, key, lane);
  unsigned mine_key = kNoKey, mine_expert = 0;  // lane j < topk: the j-th choice
  for (int j = 0; j < topk; ++j) {
    const unsigned top = warp_extreme<true>(head.key0);
    const unsigned offered = router_lanes::offer(head, top);
    const unsigned chosen = warp_extreme<false>(offered);
    if (lane == j) {
      mine_key = top;
      mine_expert = chosen;
    }
    if (offered == chosen) router_lanes::pop(head);
    // warp-uniform: the rare round after which some lane has given its head's two
    if (j + 1 < topk && __any_sync(0xffffffffu, router_lanes::wants_refill(head)) &&
        router_lanes::wants_refill(head))
      router_lanes::fill<false>(head, key, lane);
  }
  const float mine = router_lanes::key_score(mine_key);
  const float total = warp_sum(lane < topk ? mine : 0.0f);
  if (lane < topk) {
    experts[lane] = mine_expert;
    weights[lane] = renormalize ? mine / total : mine;
  }
}

// This warp's tokens: its own, then a grid's warps apart (a grid the GPU holds at once), the
// next token's rows loaded before the current one's work, so that load is in flight while the
// warp computes. One token's load then its work, as before, left too few loads in flight to
// keep the memory busy (on the H200: 37% of its bandwidth). Rows: what load(t, rows) fills
// and work(t, rows) takes.
template <class Rows, class Load, class Work>
__device__ void each_token_prefetched(std::int64_t num_tokens, const Load& load, const Work& work) {
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (t >= num_tokens) return;  // the whole warp leaves together
  Rows next;
  load(t, next);
  for (; t < num_tokens; t += warps) {
    Rows rows = next;
    if (t + warps < num_tokens) load(t + warps, next);
    work(t, rows);
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
constexpr int kStages = 3;  // the rows of each_token_staged's ring

// 16 bytes from global to shared memory without the registers (cp.async, sm_80 and later),
// both 16-byte aligned; wait_copies waits for this thread's copies.
__device__ void copy_async16(void* to, const void* from) {
  const auto shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(from) : "memory");
}

// Closes this thread's copies issued since the last commit into a group (none: an empty one).
__device__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's groups are still in flight.
template <int kPending>
__device__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// each_token_prefetched's tokens in its order, for rows of exactly kPer * 32 floats (kFull,
// kPer a multiple of 4): each staged through a ring of kStages rows a warp in shared memory,
// kStages - 1 in flight while the warp routes one (each_token_prefetched has one, in registers,
// so more registers would mean fewer warps). Each lane copies its own 16-byte chunks of a row
// (router_lanes::expert_of) and reads back only those, so it waits for its own copies and for
// no other lane. work(t, v) takes the row as each_token_prefetched's rows.
template <int kPer, class Work>
__device__ void each_token_staged(std::int64_t num_tokens, const float* rows, const Work& work) {
  static_assert(kPer % 4 == 0, "16-byte chunks");
  constexpr int kChunks = kPer / 4, kRowChunks = kChunks * kWarp;
  __shared__ float4 ring[kWarpsPerBlock][kStages][kRowChunks];
  const int warp = static_cast<int>(threadIdx.x / kWarp),
            lane = static_cast<int>(threadIdx.x % kWarp);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (first >= num_tokens) return;  // the whole warp leaves together
  const auto issue = [&](std::int64_t t, int stage) {
    if (t < num_tokens) {
      const auto* row = reinterpret_cast<const float4*>(rows) + t * kRowChunks;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        copy_async16(&ring[warp][stage][c * kWarp + lane], row + c * kWarp + lane);
    }
    commit_copies();  // a group a token, empty past the last, so that the counts below hold
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(first + s * warps, s);
  int stage = 0;  // token i of this warp's is in stage i % kStages
  for (std::int64_t t = first; t < num_tokens; t += warps) {
    wait_copies<kStages - 2>();  // groups issued: kStages - 1 + i; token i's is the oldest
    float v[kPer];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const float4 q = ring[warp][stage][c * kWarp + lane];
      v[4 * c] = q.x, v[4 * c + 1] = q.y, v[4 * c + 2] = q.z, v[4 * c + 3] = q.w;
    }
    // token i + kStages - 1 into the stage token i - 1 took, which work(i - 1) has used
    issue(t + (kStages - 1) * warps, stage == 0 ? kStages - 1 : stage - 1);
    work(t, v);
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
}
#endif

template <int kPer>
struct logits_rows {
  float v[kPer];
};

template <int kPer, bool kFull>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp, kForwardMinBlocks<kPer>)
    router_forward_kernel(std::int64_t num_tokens, const float* logits, float* scores,
                          std::int64_t* experts, float* weights, int num_experts, int topk,
                          bool sigmoid, bool renormalize, bool chunked) {
  const row_slots<kPer, kFull> row{static_cast<int>(threadIdx.x % kWarp), num_experts, chunked};
  const auto route = [&](std::int64_t t, float(&v)[kPer]) {
    route_token(row, v, scores + t * num_experts, experts + t * topk, weights + t * topk, topk,
                sigmoid, renormalize);
  };
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  if constexpr (kStagedOf<kPer, kFull>) {
    each_token_staged<kPer>(num_tokens, logits, route);
    return;
  }
#endif
  each_token_prefetched<logits_rows<kPer>>(
      num_tokens,
      [&](std::int64_t t, logits_rows<kPer>& r) {
        row.load(logits + t * num_experts, r.v, -FLT_MAX);
      },
      [&](std::int64_t t, logits_rows<kPer>& r) { route(t, r.v); });
}

// One token's backward: p and gs its scores and their gradient in registers (gs zero where
// none was given, both zero past the last expert), p_row and gs_row the same in memory (for the
// chosen experts' values, which other lanes hold), experts and grad_weights its topk.
template <int kPer, bool kFull>
__device__ void route_token_backward(const row_slots<kPer, kFull>& row, const float (&p)[kPer],
                                     const float (&gs)[kPer], const float* p_row,
                                     const float* gs_row, const std::int64_t* experts,
                                     const float* grad_weights, float* dx_row, int topk,
                                     bool sigmoid, bool renormalize) {
  const bool chooser = row.lane < topk;
  const int e = chooser ? static_cast<int>(experts[row.lane]) : 0;
  const float pe = chooser ? p_row[e] : 0.0f;
  float g = chooser ? grad_weights[row.lane] : 0.0f;  // becomes dL/dscore of e
  if (renormalize) {
    const float total = warp_sum(pe);
    const float dot = warp_sum(g * pe) / total;
    g = (g - dot) / total;
  }
  // dL/dscore: gs plus g at the chosen experts, which their choosers write last
  const float gse = chooser && gs_row ? gs_row[e] : 0.0f;
  float dx[kPer];
  float chosen_dx;
  if (sigmoid) {
#pragma unroll
    for (int s = 0; s < kPer; ++s) dx[s] = gs[s] * p[s] * (1.0f - p[s]);
    chosen_dx = (gse + g) * pe * (1.0f - pe);
  } else {
    float part = chooser ? pe * g : 0.0f;  // sum_m p_m dp_m: the weights' share...
#pragma unroll
    for (int s = 0; s < kPer; ++s) part += p[s] * gs[s];  // ...and the scores'
    const float dot = warp_sum(part);
#pragma unroll
    for (int s = 0; s < kPer; ++s) dx[s] = p[s] * (gs[s] - dot);
    chosen_dx = pe * (gse + g - dot);
  }
  __syncwarp();  // every lane's reads of p_row and gs_row before any write (dx may alias them)
  row.store(dx_row, dx);
  __syncwarp();  // the row's writes before the chosen experts' own
  if (chooser) dx_row[e] = chosen_dx;
}

template <int kPer>
struct score_rows {
  float p[kPer], gs[kPer];
};

// As the forward (each_token_prefetched). chunked covers scores, grad_scores (when given) and
// grad_logits.
template <int kPer, bool kFull>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    router_backward_kernel(std::int64_t num_tokens, const float* scores,
                           const std::int64_t* experts, const float* grad_weights,
                           const float* grad_scores, float* grad_logits, int num_experts, int topk,
                           bool sigmoid, bool renormalize, bool chunked) {
  const row_slots<kPer, kFull> row{static_cast<int>(threadIdx.x % kWarp), num_experts, chunked};
  each_token_prefetched<score_rows<kPer>>(
      num_tokens,
      [&](std::int64_t t, score_rows<kPer>& r) {
        row.load(scores + t * num_experts, r.p, 0.0f);
        if (grad_scores) {
          row.load(grad_scores + t * num_experts, r.gs, 0.0f);
        } else {
#pragma unroll
          for (int s = 0; s < kPer; ++s) r.gs[s] = 0.0f;
        }
      },
      [&](std::int64_t t, score_rows<kPer>& r) {
        route_token_backward(row, r.p, r.gs, scores + t * num_experts,
                             grad_scores ? grad_scores + t * num_experts : nullptr,
                             experts + t * topk, grad_weights + t * topk,
                             grad_logits + t * num_experts, topk, sigmoid, renormalize);
      });
}

std::int64_t blocks_for(std::int64_t num_tokens) {
  return (num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock;
}

// A grid of a block a warp's token, at most as many blocks as the device holds at once (its
// SMs times the blocks of the kernel each holds, asked once a process).
template <auto kKernel>
unsigned resident_blocks(std::int64_t num_tokens) {
  static const int per_sm = [] {
    int n = 0;
    MUSTER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kKernel, kWarpsPerBlock * kWarp, 0));
    return n > 0 ? n : 1;
  }();
  int device = 0, sms = 0;
  MUSTER_CUDA_CHECK(cudaGetDevice(&device));
  MUSTER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const auto resident = static_cast<std::int64_t>(per_sm) * sms;
  return static_cast<unsigned>(std::min(blocks_for(num_tokens), resident));
}

template <auto kKernel, class... Args>
void launch_resident(std::int64_t num_tokens, void* stream, Args... args) {
  kKernel<<<resident_blocks<kKernel>(num_tokens), kWarpsPerBlock * kWarp, 0,
            static_cast<cudaStream_t>(stream)>>>(num_tokens, args...);
}

// Whether rows of num_experts floats at these pointers (null: none) move in chunks of the
// kernels' width for kPer slots a lane (router_lanes::kWidthOf).
template <int kPer>
bool chunks_fit(std::int64_t num_experts, std::initializer_list<const void*> rows) {
  return rows_in_chunks(router_lanes::kWidthOf<kPer>, num_experts, rows);
}

// Whether chunked rows of num_experts fill kPer slots a lane (row_slots' kFull).
template <int kPer>
bool fills_slots(std::int64_t num_experts, bool chunked) {
  return chunked && num_experts == std::int64_t{kPer} * kWarp;
}

// f(std::true_type{}) where full, else f(std::false_type{}): a kernel's kFull from a test.
template <class F>
void with_full(bool full, F&& f) {
  if (full)
    f(std::true_type{});
  else
    f(std::false_type{});
}

template <int kPer>
void launch_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& s, void* stream) {
  const bool chunked = chunks_fit<kPer>(s.num_experts, {logits, scores});
  with_full(fills_slots<kPer>(s.num_experts, chunked), [&](auto full) {
    launch_resident<router_forward_kernel<kPer, decltype(full)::value>>(
        s.num_tokens, stream, logits, scores, experts, weights, static_cast<int>(s.num_experts),
        s.topk, s.score == router_score::sigmoid, s.renormalize, chunked);
  });
}

template <int kPer>
void launch_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& s,
                     void* stream) {
  const bool chunked = chunks_fit<kPer>(s.num_experts, {scores, grad_scores, grad_logits});
  with_full(fills_slots<kPer>(s.num_experts, chunked), [&](auto full) {
    launch_resident<router_backward_kernel<kPer, decltype(full)::value>>(
        s.num_tokens, stream, scores, experts, grad_weights, grad_scores, grad_logits,
        static_cast<int>(s.num_experts), s.topk, s.score == router_score::sigmoid, s.renormalize,
        chunked);
  });
}

// Calls launch<kPer>(args...) with the fewest slots a lane (a power of two) that hold the
// experts.
template <template <int> class Launch, class... Args>
void by_slots(std::int64_t num_experts, Args&&... args) {
  const auto per_lane = (num_experts + kWarp - 1) / kWarp;
  if (per_lane <= 1)
    Launch<1>::run(args...);
  else if (per_lane <= 2)
    Launch<2>::run(args...);
  else if (per_lane <= 4)
    Launch<4>::run(args...);
  else if (per_lane <= 8)
    Launch<8>::run(args...);
  else if (per_lane <= 16)
    Launch<16>::run(args...);
  else
    Launch<kPerLane>::run(args...);
}

template <int kPer>
struct forward_launch {
  template <class... Args>
  static void run(Args&&... args) {
    launch_forward<kPer>(args...);
  }
};

template <int kPer>
struct backward_launch {
  template <class... Args>
  static void run(Args&&... args) {
    launch_backward<kPer>(args...);
  }
};

}  // namespace

void router_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& s, void* stream) {
  check_router_shape(s);
  if (s.num_tokens == 0) return;
  by_slots<forward_launch>(s.num_experts, logits, scores, experts, weights, s, stream);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

void router_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& s,
                     void* stream) {
  check_router_shape(s);
  if (s.num_tokens == 0) return;
  by_slots<backward_launch>(s.num_experts, scores, experts, grad_weights, grad_scores, grad_logits,
                            s, stream);
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

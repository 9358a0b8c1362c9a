// One lane's part of the router's top-k on the GPU (kernels/cuda/router.cu). A warp holds one
// token; each lane holds the score keys of kPer experts (its slots) in registers and keeps a
// head: its best two experts not yet chosen. A top-k round is then two warp reductions over the
// lanes' heads (the largest key, then the lowest expert id holding it) and a pop by the one
// lane whose head was chosen. A lane that gives a third choice refills its head from the slots
// after the last it gave, which is rare: 3.4% of tokens with 256 experts, top 8, random scores.
// Before, every round scanned every slot of every lane and cleared the chosen one: about 50 PTX
// instructions a round at 8 slots a lane, now about 27 and one scan of the slots at the start.
//
// Plain C++ but for MUSTER_HD, so a CPU test runs this same code lane by lane against the CPU
// router (tests/kernels/test_router_lanes.cpp). It is not a public API.
#pragma once

#include <cstring>

#ifdef __CUDACC__
#define MUSTER_HD __host__ __device__ __forceinline__
#else
#define MUSTER_HD inline
#endif

namespace muster::kernels::cuda::router_lanes {

inline constexpr int kWarp = 32;
inline constexpr unsigned kNoKey = 0;  // no expert in this slot, or one chosen already

// Slots hold experts in chunks of kWidth consecutive ones, lane after lane: slot s of lane l is
// expert ((s / kWidth) * 32 + l) * kWidth + s % kWidth. So a warp loads a chunk as one
// contiguous run (kWidth 4: 16 bytes a lane, 512 a warp), and a lane's experts ascend with
// its slots.
template <int kWidth>
MUSTER_HD int expert_of(int lane, int slot) {
  return (slot / kWidth * kWarp + lane) * kWidth + slot % kWidth;
}

// The chunk width of kPer slots a lane: up to 4 floats, a 16-byte load.
template <int kPer>
inline constexpr int kWidthOf = kPer < 4 ? kPer : 4;

MUSTER_HD unsigned float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

MUSTER_HD float bits_float(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// A score's key. Scores are >= 0 (softmax, sigmoid), so their bits order as unsigned integers;
// key = bits + 1 (0 < score <= 1 fits), 1 for zero and for NaN (a NaN logit makes every softmax
// score NaN: the lowest experts are then chosen, never an id out of range), and kNoKey for a
// negative score (the kernel's mark for a slot past the last expert).
MUSTER_HD unsigned score_key(float score) {
  if (score > 0.0f) return float_bits(score) + 1u;
  return score < 0.0f ? kNoKey : 1u;
}

// The score of a key (kNoKey: 0).
MUSTER_HD float key_score(unsigned key) {
  return key > 1u ? bits_float(key - 1u) : 0.0f;
}

// A lane's best two experts not yet chosen, in the top-k's order: descending key, ascending
// expert id. Ids rather than slots, so a round reads them as they are.
struct lane_head {
  unsigned key0 = kNoKey, key1 = kNoKey;  // key0 comes first; kNoKey: none
  unsigned expert0 = 0, expert1 = 0;
  unsigned last_key = ~0u;  // the last expert this lane gave, (~0u, none) before the first
  unsigned last_expert = 0;
  unsigned more = 0;  // 1: slots after key1 may hold keys to give: refill when key0 runs out
};

// Fills `h` with the best two of lane `lane`'s slots `key` after (h.last_key, h.last_expert) in
// the top-k's order; kFirst: before any was given (every slot is after).
template <bool kFirst, int kPer>
MUSTER_HD void fill(lane_head& h, const unsigned (&key)[kPer], int lane) {
  h.key0 = h.key1 = kNoKey;
  h.expert0 = h.expert1 = 0;
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int s = 0; s < kPer; ++s) {
    const unsigned k = key[s];
    const auto e = static_cast<unsigned>(expert_of<kWidthOf<kPer>>(lane, s));
    const bool after = kFirst || k < h.last_key || (k == h.last_key && e > h.last_expert);
    if (after && k > h.key1) {  // strictly greater: the earlier slot of equal keys stays first
      if (k > h.key0) {
        h.key1 = h.key0;
        h.expert1 = h.expert0;
        h.key0 = k;
        h.expert0 = e;
      } else {
        h.key1 = k;
        h.expert1 = e;
      }
    }
  }
  h.more = h.key1 != kNoKey ? 1u : 0u;
}

// The lane's head was chosen: the next in line comes first.
MUSTER_HD void pop(lane_head& h) {
  h.last_key = h.key0;
  h.last_expert = h.expert0;
  h.key0 = h.key1;
  h.expert0 = h.expert1;
  h.key1 = kNoKey;
}

// Whether the lane's head has run out while its slots may still hold keys.
MUSTER_HD bool wants_refill(const lane_head& h) {
  return h.key0 == kNoKey && h.more != 0;
}

// What a lane offers to a round's second reduction: its head's expert if its key is the
// round's largest, else ~0u (never the lowest, so never chosen).
MUSTER_HD unsigned offer(const lane_head& h, unsigned top) {
  return h.key0 == top && top != kNoKey ? h.expert0 : ~0u;
}

}  // namespace muster::kernels::cuda::router_lanes

// The GPU router's top-k as its lanes hold it (kernels/cuda/router_lanes.hpp), run here lane by
// lane: the same fill, offer, pop and refill the kernel calls, with the warp's two reductions
// and its vote done as loops over the 32 lanes. Its choices must be the CPU router's exactly
// (keys from the CPU's own scores, so there are no near-ties to excuse), and the refill of a
// lane that gives more than two must run. The kernel's loads, softmax and writes around it are
// tested on a GPU (test_router_cuda.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/cuda/router_lanes.hpp"
#include "muster/kernels/router.hpp"
#include "tests/kernels/normal_draws.hpp"
#include "tests/kernels/router_cases.hpp"

using namespace muster::kernels;
namespace lanes = muster::kernels::cuda::router_lanes;
using muster::test::describe;
using muster::test::router_case;

namespace {

// One token's top-k from its scores (num_experts of them), as the kernel's warp finds it with
// kPer slots a lane; `refills` counts the lanes refilled.
template <int kPer>
std::vector<std::int64_t> lanes_topk(const float* scores, int num_experts, int topk,
                                     std::size_t& refills) {
  constexpr int kWidth = lanes::kWidthOf<kPer>;
  unsigned key[lanes::kWarp][kPer];
  lanes::lane_head head[lanes::kWarp];
  for (int lane = 0; lane < lanes::kWarp; ++lane) {
    for (int s = 0; s < kPer; ++s) {
      const int e = lanes::expert_of<kWidth>(lane, s);
      key[lane][s] = lanes::score_key(e < num_experts ? scores[e] : -1.0f);  // the kernel's mark
    }
    lanes::fill<true>(head[lane], key[lane], lane);
  }
  std::vector<std::int64_t> chosen;
  for (int j = 0; j < topk; ++j) {
    unsigned top = 0, pick = ~0u, offered[lanes::kWarp];
    for (const auto& h : head) top = std::max(top, h.key0);  // __reduce_max_sync
    for (int lane = 0; lane < lanes::kWarp; ++lane) {
      offered[lane] = lanes::offer(head[lane], top);
      pick = std::min(pick, offered[lane]);  // __reduce_min_sync
    }
    chosen.push_back(pick);
    for (int lane = 0; lane < lanes::kWarp; ++lane)
      if (offered[lane] == pick) lanes::pop(head[lane]);
    if (j + 1 < topk)
      for (int lane = 0; lane < lanes::kWarp; ++lane)
        if (lanes::wants_refill(head[lane])) {
          lanes::fill<false>(head[lane], key[lane], lane);
          ++refills;
        }
  }
  return chosen;
}

// The kernel's choice of kPer: the fewest (a power of two) that hold the experts.
std::vector<std::int64_t> lanes_topk(const float* scores, int num_experts, int topk,
                                     std::size_t& refills) {
  const int per_lane = (num_experts + lanes::kWarp - 1) / lanes::kWarp;
  if (per_lane <= 1) return lanes_topk<1>(scores, num_experts, topk, refills);
  if (per_lane <= 2) return lanes_topk<2>(scores, num_experts, topk, refills);
  if (per_lane <= 4) return lanes_topk<4>(scores, num_experts, topk, refills);
  if (per_lane <= 8) return lanes_topk<8>(scores, num_experts, topk, refills);
  if (per_lane <= 16) return lanes_topk<16>(scores, num_experts, topk, refills);
  return lanes_topk<32>(scores, num_experts, topk, refills);
}

// Every token's choices by the lanes against the CPU router's; returns the refills.
std::size_t check_against_cpu(const router_shape& s, const std::vector<float>& logits) {
  const auto n = std::size_t(s.num_tokens * s.num_experts), nk = std::size_t(s.num_tokens * s.topk);
  std::vector<float> scores(n), weights(nk);
  std::vector<std::int64_t> chosen(nk);
  cpu::router_forward(logits.data(), scores.data(), chosen.data(), weights.data(), s);
  std::size_t refills = 0, wrong = 0;
  for (std::int64_t t = 0; t < s.num_tokens; ++t) {
    const auto got =
        lanes_topk(scores.data() + t * s.num_experts, int(s.num_experts), s.topk, refills);
    const std::vector<std::int64_t> want(chosen.begin() + t * s.topk,
                                         chosen.begin() + (t + 1) * s.topk);
    if (got != want && ++wrong <= 3) {
      INFO("token " << t);
      CHECK(got == want);
    }
  }
  CHECK(wrong == 0);
  return refills;
}

}  // namespace

TEST_CASE("the GPU router's slots hold every expert once, ascending within a lane",
          "[kernels][router]") {
  const auto check = [](auto per) {
    constexpr int kPer = decltype(per)::value;
    constexpr int kWidth = lanes::kWidthOf<kPer>;
    std::set<int> seen;
    for (int lane = 0; lane < lanes::kWarp; ++lane)
      for (int s = 0; s < kPer; ++s) {
        const int e = lanes::expert_of<kWidth>(lane, s);
        CHECK(seen.insert(e).second);
        if (s > 0) CHECK(e > lanes::expert_of<kWidth>(lane, s - 1));
      }
    CHECK(seen.size() == std::size_t(lanes::kWarp * kPer));
    CHECK(*seen.rbegin() == lanes::kWarp * kPer - 1);
  };
  check(std::integral_constant<int, 1>{});
  check(std::integral_constant<int, 2>{});
  check(std::integral_constant<int, 4>{});
  check(std::integral_constant<int, 8>{});
  check(std::integral_constant<int, 16>{});
  check(std::integral_constant<int, 32>{});
  // chunks of 4 consecutive experts, lane after lane: a warp's chunk is one contiguous run
  CHECK(lanes::expert_of<4>(0, 0) == 0);
  CHECK(lanes::expert_of<4>(1, 0) == 4);
  CHECK(lanes::expert_of<4>(0, 4) == 128);
  CHECK(lanes::expert_of<4>(31, 7) == 255);
}

TEST_CASE("the GPU router's lane-by-lane top-k chooses what the CPU router does",
          "[kernels][router]") {
  std::uint32_t seed = 41;
  std::size_t refills = 0;
  for (const auto score : {router_score::softmax, router_score::sigmoid})
    for (const auto& [tokens, experts, topk] :
         std::vector<std::tuple<std::int64_t, std::int64_t, int>>{{3, 1, 1},
                                                                  {50, 7, 7},
                                                                  {50, 33, 3},
                                                                  {200, 64, 8},
                                                                  {200, 100, 6},
                                                                  {500, 256, 8},
                                                                  {100, 384, 8},
                                                                  {20, 1024, 32}}) {
      const auto s = router_case(tokens, experts, topk, score);
      INFO(describe(s));
      refills +=
          check_against_cpu(s, muster::test::normal_draws(std::size_t(tokens * experts), seed++));
    }
  CHECK(refills > 0);  // with 7 experts, top 7, each lane gives its one and refills to nothing
}

// Exact ties (tie_logits), broken to the lower expert. Sigmoid scores of exactly 1 often put
// three or more of the top choices in one lane, which must refill its head; ties at key 1 (score
// 0) are chosen too.
TEST_CASE("the GPU router's lanes break ties to the lower expert and refill their heads",
          "[kernels][router]") {
  for (const auto score : {router_score::softmax, router_score::sigmoid})
    for (const auto& [tokens, experts, topk] :
         std::vector<std::tuple<std::int64_t, std::int64_t, int>>{
             {257, 8, 8}, {300, 64, 8}, {300, 256, 16}, {40, 1024, 32}}) {
      const auto s = router_case(tokens, experts, topk, score);
      INFO(describe(s));
      const auto logits = muster::test::tie_logits(std::size_t(tokens * experts), 23);
      const auto refills = check_against_cpu(s, logits);
      if (experts >= 64) CHECK(refills > 0);
    }
}

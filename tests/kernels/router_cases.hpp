// Helpers of the router tests (CPU, lane by lane, CUDA): a shape from its sizes, the line that
// names it in a failure, and logits drawn from a few values so that scores tie exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/kernels/router.hpp"

namespace muster::test {

inline kernels::router_shape router_case(std::int64_t tokens, std::int64_t experts, int topk,
                                         kernels::router_score score, bool renormalize = false) {
  kernels::router_shape s;
  s.num_tokens = tokens;
  s.num_experts = experts;
  s.topk = topk;
  s.score = score;
  s.renormalize = renormalize;
  return s;
}

// "tokens 3, experts 7, topk 2, softmax, renormalised"
inline std::string describe(const kernels::router_shape& s) {
  return "tokens " + std::to_string(s.num_tokens) + ", experts " + std::to_string(s.num_experts) +
         ", topk " + std::to_string(s.topk) +
         (s.score == kernels::router_score::softmax ? ", softmax" : ", sigmoid") +
         (s.renormalize ? ", renormalised" : "");
}

// n logits from {-100, -1, 0, 1, 100}: equal logits give equal scores on every backend and
// unequal ones differ by far more than rounding. +-100 saturates the sigmoid to exactly 1 and 0
// and underflows the softmax to 0, so ties at the top-k's smallest key are chosen too.
inline std::vector<float> tie_logits(std::size_t n, std::uint32_t seed) {
  const float values[] = {-100.0f, -1.0f, 0.0f, 1.0f, 100.0f};
  std::vector<float> logits(n);
  for (auto& x : logits) {
    seed = seed * 1664525u + 1013904223u;
    x = values[(seed >> 16) % 5];
  }
  return logits;
}

}  // namespace muster::test

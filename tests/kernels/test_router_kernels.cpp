// The router kernel on the CPU against the router written out in fp64: scores, the top-k
// choice (ties to the lower expert), the weights with and without renormalisation, and the
// backward against central differences of L = sum(grad_weights * weights), over small, odd
// and large shapes and both score functions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "muster/kernels/router.hpp"
#include "tests/kernels/normal_draws.hpp"
#include "tests/kernels/router_cases.hpp"

using namespace muster::kernels;

namespace {

// One token's weights (in top-k order) and experts, from its logits, in fp64.
struct choice {
  std::vector<std::int64_t> experts;
  std::vector<double> weights;
};

std::vector<double> scores_of(const std::vector<double>& x, router_score score) {
  std::vector<double> p(x.size());
  if (score == router_score::softmax) {
    const double top = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (std::size_t e = 0; e < x.size(); ++e) sum += p[e] = std::exp(x[e] - top);
    for (auto& v : p) v /= sum;
  } else {
    for (std::size_t e = 0; e < x.size(); ++e) p[e] = 1 / (1 + std::exp(-x[e]));
  }
  return p;
}

choice route_one(const std::vector<double>& x, const router_shape& s) {
  const auto p = scores_of(x, s.score);
  std::vector<std::int64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] > p[b]; });
  choice c;
  double total = 0;
  for (int j = 0; j < s.topk; ++j) total += p[order[j]];
  for (int j = 0; j < s.topk; ++j) {
    c.experts.push_back(order[j]);
    c.weights.push_back(p[order[j]] / (s.renormalize ? total : 1.0));
  }
  return c;
}

// The least gap between neighbours among the top k+1 scores: the choice and its order (which
// weight each gradient goes to) are stable under a nudge smaller than that.
double gap(const std::vector<double>& x, const router_shape& s) {
  auto p = scores_of(x, s.score);
  std::sort(p.rbegin(), p.rend());
  double least = 1.0;
  for (std::size_t j = 0; j + 1 < p.size() && j < std::size_t(s.topk); ++j)
    least = std::min(least, p[j] - p[j + 1]);
  return least;
}

// with_scores: the loss also takes the scores, sum(grad_scores * scores), as the balance loss
// does; else the backward is given no grad_scores.
void check(const router_shape& s, std::uint32_t seed, bool with_scores) {
  const auto n = static_cast<std::size_t>(s.num_tokens * s.num_experts);
  const auto nk = static_cast<std::size_t>(s.num_tokens * s.topk);
  auto logits = muster::test::normal_draws(n, seed);
  for (auto& v : logits) v *= 2;
  const auto grad_w = muster::test::normal_draws(nk, seed + 1);
  const auto grad_s = muster::test::normal_draws(n, seed + 2);
  std::vector<float> scores(n), weights(nk), grad_logits(n, 123.0f);
  std::vector<std::int64_t> experts(nk, -1);
  cpu::router_forward(logits.data(), scores.data(), experts.data(), weights.data(), s);
  cpu::router_backward(scores.data(), experts.data(), grad_w.data(),
                       with_scores ? grad_s.data() : nullptr, grad_logits.data(), s);

  std::int64_t checked = 0;
  for (std::int64_t t = 0; t < s.num_tokens; ++t) {
    INFO("token " << t << " of " << s.num_tokens << ", experts " << s.num_experts << ", topk "
                  << s.topk << (s.score == router_score::softmax ? ", softmax" : ", sigmoid")
                  << (s.renormalize ? ", renormalised" : ""));
    std::vector<double> x(logits.begin() + t * s.num_experts,
                          logits.begin() + (t + 1) * s.num_experts);
    const auto want = route_one(x, s);
    const auto p = scores_of(x, s.score);
    for (std::int64_t e = 0; e < s.num_experts; ++e)
      REQUIRE(scores[std::size_t(t * s.num_experts + e)] ==
              Approx(p[std::size_t(e)]).epsilon(1e-5).margin(1e-7));
    for (int j = 0; j < s.topk; ++j) {
      const auto at = std::size_t(t * s.topk + j);
      REQUIRE(experts[at] == want.experts[std::size_t(j)]);
      REQUIRE(weights[at] == Approx(want.weights[std::size_t(j)]).epsilon(1e-5).margin(1e-7));
    }
    // the backward against central differences, where the choice is stable under the nudge
    // a nudge of h moves a score by at most h/4 (softmax and sigmoid)
    if (gap(x, s) < 1e-6) continue;
    ++checked;
    const double h = 1e-6;
    for (std::int64_t e = 0; e < s.num_experts; ++e) {
      auto loss = [&](double nudge) {
        auto y = x;
        y[std::size_t(e)] += nudge;
        const auto c = route_one(y, s);
        double l = 0;
        for (int j = 0; j < s.topk; ++j)
          l += grad_w[std::size_t(t * s.topk + j)] * c.weights[std::size_t(j)];
        if (with_scores) {
          const auto q = scores_of(y, s.score);
          for (std::int64_t m = 0; m < s.num_experts; ++m)
            l += grad_s[std::size_t(t * s.num_experts + m)] * q[std::size_t(m)];
        }
        return l;
      };
      const double numeric = (loss(h) - loss(-h)) / (2 * h);
      REQUIRE(grad_logits[std::size_t(t * s.num_experts + e)] ==
              Approx(numeric).epsilon(1e-3).margin(2e-5));
    }
  }
  CHECK(checked * 2 >= s.num_tokens);  // the backward was checked on most tokens
}

}  // namespace

TEST_CASE(
    "router_forward and router_backward match the fp64 router over small, odd and large "
    "shapes",
    "[kernels][router]") {
  std::uint32_t seed = 11;
  for (const auto score : {router_score::softmax, router_score::sigmoid})
    for (const bool renormalize : {false, true})
      for (const auto& [tokens, experts, topk] :
           std::vector<std::tuple<std::int64_t, std::int64_t, int>>{
               {1, 1, 1}, {3, 2, 1}, {7, 13, 3}, {5, 64, 8}, {257, 128, 8}, {2, 1024, 32}}) {
        const auto s = muster::test::router_case(tokens, experts, topk, score, renormalize);
        check(s, seed, false);
        check(s, seed++, true);
      }
}

TEST_CASE("router ties go to the lower expert id", "[kernels][router]") {
  router_shape s;
  s.num_tokens = 1;
  s.num_experts = 6;
  s.topk = 3;
  const std::vector<float> logits = {0.5f, 2.0f, 0.5f, 2.0f, 0.5f, 0.5f};
  std::vector<float> scores(6), weights(3);
  std::vector<std::int64_t> experts(3);
  cpu::router_forward(logits.data(), scores.data(), experts.data(), weights.data(), s);
  CHECK(experts == std::vector<std::int64_t>{1, 3, 0});
  CHECK(weights[0] == weights[1]);
}

TEST_CASE("the router refuses shapes outside its contract, naming the value", "[kernels][router]") {
  router_shape s;
  s.num_tokens = 1;
  s.num_experts = 4;
  s.topk = 5;
  CHECK_THROWS_WITH(check_router_shape(s),
                    Catch::Contains("topk 5 is not within 1..min(32, num_experts 4)"));
  s.topk = 1;
  s.num_experts = 2000;
  CHECK_THROWS_WITH(check_router_shape(s),
                    Catch::Contains("num_experts 2000 is not within 1..1024"));
  s.num_experts = 4;
  s.num_tokens = -1;
  CHECK_THROWS_AS(check_router_shape(s), std::invalid_argument);
}

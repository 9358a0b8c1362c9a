// The router op (engine/ops/router_op.hpp) over the kernel against torch's softmax/sigmoid,
// topk and division: the same experts, weights and scores, and the same gradient to the
// logits when a loss reads both the weights and the scores (as the balance loss does).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "engine/ops/router_op.hpp"

using muster::engine::ops::route_topk;

TEST_CASE("route_topk over the kernel matches torch's router, forward and backward",
          "[router_op]") {
  torch::manual_seed(3);
  for (const bool sigmoid : {false, true})
    for (const bool renormalize : {false, true})
      for (const auto& [tokens, experts, topk] :
           std::vector<std::tuple<int, int, int>>{{1, 4, 1}, {37, 8, 2}, {300, 64, 6}}) {
        INFO("tokens " << tokens << " experts " << experts << " topk " << topk
                       << (sigmoid ? " sigmoid" : " softmax")
                       << (renormalize ? " renormalised" : ""));
        const auto base = torch::randn({tokens, experts}) * 2;
        const auto g = torch::randn({tokens, topk}), h = torch::randn({tokens, experts});

        auto x = base.clone().requires_grad_(true);
        auto out = route_topk(x, topk, sigmoid, renormalize);
        ((out.weights * g).sum() + (out.scores * h).sum()).backward();

        auto y = base.clone().requires_grad_(true);
        auto scores = sigmoid ? torch::sigmoid(y) : torch::softmax(y, -1);
        auto [top, chosen] = scores.topk(topk, -1);
        if (renormalize) top = top / top.sum(-1, true);
        ((top * g).sum() + (scores * h).sum()).backward();

        CHECK(torch::equal(out.experts, chosen));
        CHECK(torch::allclose(out.weights, top, 1e-5, 1e-6));
        CHECK(torch::allclose(out.scores, scores, 1e-5, 1e-6));
        CHECK(torch::allclose(x.grad(), y.grad(), 1e-4, 1e-6));
      }
}

TEST_CASE("route_topk with only the weights used, and on logits the kernel does not take",
          "[router_op]") {
  torch::manual_seed(4);
  const auto base = torch::randn({50, 16});
  auto x = base.clone().requires_grad_(true);
  auto out = route_topk(x, 4, false, true);
  out.weights.sum().backward();  // renormalised weights sum to 1 per token: no gradient
  CHECK(x.grad().abs().max().item<float>() < 1e-5);

  // fp64 takes torch's path, with the same choice
  auto d = route_topk(base.to(torch::kFloat64), 4, false, true);
  CHECK(torch::equal(d.experts, out.experts));
  CHECK(torch::allclose(d.weights.to(torch::kFloat32), out.weights, 1e-5, 1e-6));
}

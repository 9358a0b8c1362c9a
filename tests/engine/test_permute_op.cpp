// The token permutation ops (engine/ops/permute_op.hpp) over the kernels against their torch
// path (taken by fp64): the same rows and combine, and the same gradients to the tokens, the
// experts' rows and the router's weights, with dropped assignments.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "engine/ops/permute_op.hpp"

namespace ops = muster::engine::ops;

TEST_CASE("permute_rows and unpermute_rows over the kernels match torch's path, with gradients",
          "[permute_op]") {
  torch::manual_seed(9);
  const std::int64_t tokens = 45, topk = 3, experts = 7, hidden = 19;
  auto chosen = torch::randint(0, experts, {tokens, topk}, torch::kInt64);
  chosen.masked_fill_(torch::rand({tokens, topk}) < 0.1, -1);  // dropped over capacity
  const auto perm = ops::permute_index(chosen, experts);
  REQUIRE(perm.counts.sum().item<std::int64_t>() == perm.num_rows);
  REQUIRE(perm.num_rows == (chosen >= 0).sum().item<std::int64_t>());

  const auto x0 = torch::randn({tokens, hidden}, torch::kFloat64);
  const auto w0 = torch::rand({tokens, topk}, torch::kFloat64);
  const auto scale = torch::randn({perm.num_rows, hidden}, torch::kFloat64);
  const auto g = torch::randn({tokens, hidden}, torch::kFloat64);
  auto run = [&](torch::Dtype dtype) {
    auto x = x0.to(dtype).requires_grad_(true);
    auto w = w0.to(dtype).requires_grad_(true);
    auto rows = ops::permute_rows(x, perm);
    auto y = ops::unpermute_rows(rows * scale.to(dtype), perm, w);  // the "experts": a scale
    (y * g.to(dtype)).sum().backward();
    return std::tuple{rows.detach().to(torch::kFloat64), y.detach().to(torch::kFloat64),
                      x.grad().to(torch::kFloat64), w.grad().to(torch::kFloat64)};
  };
  const auto [rows32, y32, gx32, gw32] = run(torch::kFloat32);  // the kernels
  const auto [rows64, y64, gx64, gw64] = run(torch::kFloat64);  // torch's path
  CHECK(torch::allclose(rows32, rows64, 1e-6, 1e-6));
  CHECK(torch::allclose(y32, y64, 1e-5, 1e-5));
  CHECK(torch::allclose(gx32, gx64, 1e-5, 1e-5));
  CHECK(torch::allclose(gw32, gw64, 1e-4, 1e-5));
  // dropped assignments: no gradient to their weights
  CHECK(gw32.masked_select(chosen < 0).abs().sum().item<double>() == 0.0);
}

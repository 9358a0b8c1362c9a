// The token permutation ops (engine/ops/permute_op.hpp) over the kernels against their torch
// path (taken by fp64): the same rows and combine, and the same gradients to the tokens, the
// experts' rows and the router's weights, with dropped assignments; fp32 rows, and bf16 rows
// with fp32 weights (within bf16's rounding).
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
  // dtype: the tokens' and rows'; the weights' is fp32 unless dtype is fp64
  auto run = [&](torch::Dtype dtype) {
    const auto weights_dtype = dtype == torch::kFloat64 ? dtype : torch::kFloat32;
    // detached: to(fp64) of x0 is x0 itself, which must not become a leaf of every run
    auto x = x0.to(dtype).detach().requires_grad_(true);
    auto w = w0.to(weights_dtype).detach().requires_grad_(true);
    auto rows = ops::permute_rows(x, perm);
    auto y = ops::unpermute_rows(rows * scale.to(dtype), perm, w);  // the "experts": a scale
    REQUIRE(y.scalar_type() == dtype);
    const bool kernels = dtype != torch::kFloat64;
    CHECK((rows.grad_fn()->name().find("permute_function") != std::string::npos) == kernels);
    CHECK((y.grad_fn()->name().find("unpermute_function") != std::string::npos) == kernels);
    (y * g.to(dtype)).sum().backward();
    REQUIRE(w.grad().scalar_type() == weights_dtype);
    return std::tuple{rows.detach().to(torch::kFloat64), y.detach().to(torch::kFloat64),
                      x.grad().to(torch::kFloat64), w.grad().to(torch::kFloat64)};
  };
  const auto [rows32, y32, gx32, gw32] = run(torch::kFloat32);  // the kernels
  const auto [rows64, y64, gx64, gw64] = run(torch::kFloat64);  // torch's path
  const auto [rows16, y16, gx16, gw16] = run(torch::kBFloat16);  // the kernels' bf16
  // bf16: inputs, the scaled rows and results each rounded (2^-8 relative each)
  CHECK(torch::equal(rows16, x0.to(torch::kBFloat16).to(torch::kFloat64).index_select(
                                 0, torch::div(perm.source_of, topk, "floor"))));
  CHECK(torch::allclose(y16, y64, 0.02, 0.02));
  CHECK(torch::allclose(gx16, gx64, 0.02, 0.02));
  CHECK(torch::allclose(gw16, gw64, 0.02, 0.02));
  CHECK(gw16.masked_select(chosen < 0).abs().sum().item<double>() == 0.0);
  CHECK(torch::allclose(rows32, rows64, 1e-6, 1e-6));
  CHECK(torch::allclose(y32, y64, 1e-5, 1e-5));
  CHECK(torch::allclose(gx32, gx64, 1e-5, 1e-5));
  CHECK(torch::allclose(gw32, gw64, 1e-4, 1e-5));
  // dropped assignments: no gradient to their weights
  CHECK(gw32.masked_select(chosen < 0).abs().sum().item<double>() == 0.0);
}

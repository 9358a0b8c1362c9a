// The experts' grouped linear (engine/ops/grouped_linear_op.hpp) over the grouped GEMM kernel
// against its per-expert torch path (taken by fp64): the same rows out, the same gradient to the
// rows and to every expert's weight, with experts given no rows (zero gradient) among them; and
// a non-contiguous weight taking the per-expert path.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "engine/model/autocast_scope.hpp"
#include "engine/ops/grouped_linear_op.hpp"

namespace ops = muster::engine::ops;

TEST_CASE("grouped_linear over the kernel matches a linear per expert, with gradients",
          "[grouped_linear_op]") {
  torch::manual_seed(11);
  const std::int64_t in = 19, out = 23;
  for (const auto& rows :
       std::vector<std::vector<std::int64_t>>{{5, 0, 17, 1, 0, 40}, {0, 0, 0}, {64}}) {
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    INFO("rows " << total << " over " << rows.size() << " experts");
    const auto x0 = torch::randn({total, in}, torch::kFloat64);
    const auto g = torch::randn({total, out}, torch::kFloat64);
    std::vector<torch::Tensor> w0;
    for (std::size_t e = 0; e < rows.size(); ++e)
      w0.push_back(torch::randn({out, in}, torch::kFloat64));
    auto run = [&](torch::Dtype dtype) {
      auto x = x0.to(dtype).requires_grad_(true);
      std::vector<torch::Tensor> w;
      for (const auto& t : w0) w.push_back(t.to(dtype).requires_grad_(true));
      auto y = ops::grouped_linear(x, rows, w);
      (y * g.to(dtype)).sum().backward();
      std::vector<torch::Tensor> gw;
      for (const auto& t : w)  // the per-expert path leaves an expert without rows ungraded
        gw.push_back(t.grad().defined() ? t.grad().to(torch::kFloat64)
                                        : torch::zeros_like(t, torch::kFloat64));
      return std::tuple{y.detach().to(torch::kFloat64), x.grad().to(torch::kFloat64), gw};
    };
    const auto [y32, gx32, gw32] = run(torch::kFloat32);  // the kernel
    const auto [y64, gx64, gw64] = run(torch::kFloat64);  // a linear per expert
    REQUIRE(y32.sizes() == y64.sizes());
    CHECK(torch::allclose(y32, y64, 1e-5, 1e-4));
    CHECK(torch::allclose(gx32, gx64, 1e-5, 1e-4));
    for (std::size_t e = 0; e < rows.size(); ++e) {
      INFO("expert " << e << " with " << rows[e] << " rows");
      CHECK(torch::allclose(gw32[e], gw64[e], 1e-5, 1e-4));
      if (rows[e] == 0) CHECK(gw32[e].abs().max().item<double>() == 0.0);
    }
  }
}

TEST_CASE("grouped_linear takes a linear per expert for weights the kernel does not take",
          "[grouped_linear_op]") {
  torch::manual_seed(12);
  const std::vector<std::int64_t> rows{3, 4};
  const auto x = torch::randn({7, 5});
  const auto w0 = torch::randn({6, 5}), w1 = torch::randn({5, 6}).t();  // w1 not contiguous
  const auto y = ops::grouped_linear(x, rows, {w0, w1});
  CHECK(torch::allclose(y.narrow(0, 0, 3), torch::linear(x.narrow(0, 0, 3), w0), 1e-5, 1e-5));
  CHECK(torch::allclose(y.narrow(0, 3, 4), torch::linear(x.narrow(0, 3, 4), w1), 1e-5, 1e-5));
}

TEST_CASE("grouped_linear under CPU autocast runs in its dtype, as a linear does",
          "[grouped_linear_op]") {
  torch::manual_seed(13);
  const std::vector<std::int64_t> rows{2, 0, 5};
  const auto x = torch::randn({7, 8}, torch::requires_grad());
  std::vector<torch::Tensor> w;
  for (int e = 0; e < 3; ++e) w.push_back(torch::randn({4, 8}, torch::requires_grad()));
  muster::engine::model::autocast_scope bf16(muster::engine::model::autocast_state::bf16(true));
  const auto y = ops::grouped_linear(x, rows, w);
  CHECK(y.scalar_type() == torch::kBFloat16);
  CHECK(y.scalar_type() == torch::linear(x.narrow(0, 0, 2), w[0]).scalar_type());
  const auto want =
      torch::cat({torch::linear(x.narrow(0, 0, 2), w[0]), torch::linear(x.narrow(0, 2, 5), w[2])});
  CHECK(torch::allclose(y.to(torch::kFloat32), want.to(torch::kFloat32), 1e-2, 1e-2));
  y.sum().backward();  // the fp32 weights get their gradient through the cast
  CHECK(w[0].grad().scalar_type() == torch::kFloat32);
}

// The gradient norm's sums of squares (engine/ops/optimizer_ops.hpp) on the CPU: each tensor's
// sum in fp64, whatever its size (one chunk, several, none).
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include "engine/ops/optimizer_ops.hpp"

TEST_CASE("sums_of_squares gives each tensor's fp64 sum of squares", "[optimizer_ops]") {
  torch::manual_seed(5);
  // 200001: four chunks of the threads' split and a tail; 0: a unit with no shard here
  const std::vector<torch::Tensor> xs = {torch::randn({200001}), torch::randn({3, 5}),
                                         torch::empty({0}), torch::full({7}, 2.0f)};
  const auto sums = muster::engine::ops::sums_of_squares(xs);
  REQUIRE(sums.size() == xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("tensor " << i);
    const double want = xs[i].to(torch::kFloat64).square().sum().item<double>();
    CHECK(sums[i] == Approx(want).epsilon(1e-12));
  }
  CHECK(sums[2] == 0.0);
  CHECK(sums[3] == 28.0);
  CHECK(muster::engine::ops::sums_of_squares({}).empty());
}

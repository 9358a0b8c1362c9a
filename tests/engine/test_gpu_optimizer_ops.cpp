// The gradient norm's sums of squares on the GPU (engine/ops/optimizer_ops.hpp): tensors the
// CUDA kernel takes and tensors it does not (bf16, strided) beside CPU tensors, in one call
// that brings the device's sums back together, each equal to the CPU's fp64 sum.
// Without a CUDA device (or with a LibTorch without CUDA): "SKIPPED: no CUDA device".
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "engine/ops/optimizer_ops.hpp"

TEST_CASE("sums_of_squares of CUDA and CPU tensors in one call", "[gpu][optimizer_ops]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  torch::manual_seed(7);
  const std::vector<torch::Tensor> host = {torch::randn({1 << 20}), torch::randn({33}),
                                           torch::randn({64, 48}),  torch::empty({0}),
                                           torch::randn({1000}),    torch::randn({4097})};
  std::vector<torch::Tensor> xs = {host[0].cuda(),                       // the kernel, many blocks
                                   host[1].cuda(),                       // the kernel, one block
                                   host[2].cuda().t(),                   // strided: torch's ops
                                   host[3].cuda(),                       // empty
                                   host[4].to(torch::kBFloat16).cuda(),  // bf16: torch's ops
                                   host[5]};                             // stays on the CPU
  const auto sums = muster::engine::ops::sums_of_squares(xs);
  REQUIRE(sums.size() == xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("tensor " << i);
    const double want = xs[i].cpu().to(torch::kFloat64).square().sum().item<double>();
    CHECK(sums[i] == Approx(want).epsilon(1e-9));
  }
  CHECK(sums[3] == 0.0);
}

// RMSNorm on the GPU (engine/ops/rms_norm_op.hpp): fp32 CUDA rows take the CUDA kernels
// (one autograd node over kernels/cuda/rms_norm.cu, not torch's ops), with the values and
// gradients of the fp64 formula on the CPU; bf16 rows still take torch's ops.
// Without a CUDA device (or with a LibTorch without CUDA): "SKIPPED: no CUDA device".
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "engine/ops/rms_norm_op.hpp"

TEST_CASE(
    "RMSNorm on the GPU takes the CUDA kernels, with the fp64 formula's values and "
    "gradients",
    "[gpu][rms_norm_op]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  torch::manual_seed(31);
  // 4 x 700 rows: more than one block of the weight gradient's sums; 1000 wide: 16 bytes a lane
  for (const std::int64_t dim : {1000, 37}) {
    INFO("dim " << dim);
    const auto x0 = torch::randn({4, 700, dim}), w0 = torch::randn({dim}),
               g = torch::randn({4, 700, dim});
    auto x = x0.cuda().requires_grad_(true), w = w0.cuda().requires_grad_(true);
    auto y = muster::engine::ops::rms_norm(x, w, 1e-6);
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name().find("rms_norm_ops_function") == std::string::npos);
    CHECK(y.grad_fn()->name().find("rms_norm_function") != std::string::npos);
    const auto grads = torch::autograd::grad({y}, {x, w}, {g.cuda()});

    auto x64 = x0.to(torch::kFloat64).requires_grad_(true);
    auto w64 = w0.to(torch::kFloat64).requires_grad_(true);
    auto y64 = w64 * x64 * torch::rsqrt(x64.pow(2).mean(-1, true) + 1e-6);
    const auto want = torch::autograd::grad({y64}, {x64, w64}, {g.to(torch::kFloat64)});
    CHECK(torch::allclose(y.cpu().to(torch::kFloat64), y64, 1e-5, 1e-5));
    CHECK(torch::allclose(grads[0].cpu().to(torch::kFloat64), want[0], 1e-4, 1e-5));
    CHECK(torch::allclose(grads[1].cpu().to(torch::kFloat64), want[1], 1e-4, 1e-3));
  }
  auto xb = torch::randn({8, 64}).to(torch::kBFloat16).cuda().requires_grad_(true);
  auto yb = muster::engine::ops::rms_norm(xb, torch::ones({64}).cuda(), 1e-6);
  REQUIRE(yb.grad_fn() != nullptr);
  CHECK(yb.grad_fn()->name().find("rms_norm_ops_function") != std::string::npos);
}

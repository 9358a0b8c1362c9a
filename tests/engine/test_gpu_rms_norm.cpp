// RMSNorm on the GPU (engine/ops/rms_norm_op.hpp): fp32 and bf16 CUDA rows with an fp32 weight
// take the CUDA kernels (one autograd node over kernels/cuda/rms_norm.cu, not torch's ops),
// with the values and gradients of the fp64 formula on the CPU; a bf16 weight takes torch's.
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
  // bf16 rows of 64 (the ~1B bench's q and k heads), fp32 weight: y fp32 with the normalised
  // rows rounded to bf16, grad_x bf16; against the fp64 formula on the same bf16 values
  const auto xb0 = torch::randn({4, 900, 64}).to(torch::kBFloat16), wb0 = torch::randn({64}),
             gb = torch::randn({4, 900, 64});
  auto xb = xb0.cuda().requires_grad_(true), wb = wb0.cuda().requires_grad_(true);
  auto yb = muster::engine::ops::rms_norm(xb, wb, 1e-6);
  REQUIRE(yb.grad_fn() != nullptr);
  CHECK(yb.grad_fn()->name().find("rms_norm_ops_function") == std::string::npos);
  CHECK(yb.grad_fn()->name().find("rms_norm_function") != std::string::npos);
  CHECK(yb.scalar_type() == torch::kFloat32);
  const auto gradsb = torch::autograd::grad({yb}, {xb, wb}, {gb.cuda()});
  CHECK(gradsb[0].scalar_type() == torch::kBFloat16);
  auto x64 = xb0.to(torch::kFloat64).requires_grad_(true);
  auto w64 = wb0.to(torch::kFloat64).requires_grad_(true);
  auto y64 = w64 * x64 * torch::rsqrt(x64.pow(2).mean(-1, true) + 1e-6);
  const auto want64 = torch::autograd::grad({y64}, {x64, w64}, {gb.to(torch::kFloat64)});
  CHECK(torch::allclose(yb.cpu().to(torch::kFloat64), y64, 0.02, 0.02));
  CHECK(torch::allclose(gradsb[0].cpu().to(torch::kFloat64), want64[0], 0.02, 0.02));
  // the weight's gradient sums g times the rows rounded to bf16 (the formula's normed), which
  // the fp64 rows above are not: against those sums in fp64, over 3600 rows
  const auto x32 = xb0.to(torch::kFloat32);
  const auto normed = (x32 * torch::rsqrt(x32.square().mean(-1, true) + 1e-6)).to(torch::kBFloat16);
  const auto want_w = (gb.to(torch::kFloat64) * normed.to(torch::kFloat64)).flatten(0, 1).sum(0);
  CHECK(torch::allclose(gradsb[1].cpu().to(torch::kFloat64), want_w, 1e-4, 1e-2));
  // a bf16 weight: torch's ops
  auto yh = muster::engine::ops::rms_norm(xb, wb.detach().to(torch::kBFloat16), 1e-6);
  REQUIRE(yh.grad_fn() != nullptr);
  CHECK(yh.grad_fn()->name().find("rms_norm_ops_function") != std::string::npos);
}

// joined_linear on the GPU (engine/ops/linear_op.hpp): q, k and v projections laid one after
// another in one buffer, as their FSDP unit lays them, run as one product in fp32 and under bf16
// autocast (x cast once, the weights by one kernel); their weight gradients added into the
// buffer holding an earlier sum (in fp32 by the product itself, under bf16 autocast as a bf16
// product added in fp32), or, with no gradients yet, handed back in pieces; all against each
// projection's linear in fp64 on the CPU.
// Without a CUDA device (or with a LibTorch without CUDA): "SKIPPED: no CUDA device".
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "engine/model/autocast_scope.hpp"
#include "engine/ops/linear_op.hpp"
#include "tests/engine/count_handed.hpp"
#include "tests/engine/relative_error.hpp"

using muster::test::relative_error;

TEST_CASE("joined_linear on the GPU: one product for q, k and v, as fp64 says",
          "[gpu][linear_op]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  torch::manual_seed(41);
  const std::int64_t in = 136, rows = 300;
  const std::vector<std::int64_t> outs{256, 64, 64};
  std::int64_t total = 0;
  for (auto out : outs) total += out * in;
  const auto params = torch::randn({total}) * 0.1, earlier = torch::randn({total});
  const auto x0 = torch::randn({2, rows / 2, in}), g = torch::randn({2, rows / 2, 384});

  // fp64 on the CPU: each projection's linear, side by side
  auto x64 = x0.to(torch::kFloat64).requires_grad_(true);
  std::vector<torch::Tensor> w64, ys;
  std::int64_t at = 0;
  for (auto out : outs) {
    w64.push_back(
        params.narrow(0, at, out * in).view({out, in}).to(torch::kFloat64).requires_grad_(true));
    ys.push_back(torch::linear(x64, w64.back()));
    at += out * in;
  }
  const auto y64 = torch::cat(ys, -1);
  (y64 * g.to(torch::kFloat64)).sum().backward();

  for (const bool bf16 : {false, true})
    for (const bool buffer : {true, false}) {
      INFO((bf16 ? "bf16 autocast" : "fp32")
           << (buffer ? ", gradients in a buffer" : ", no gradients yet"));
      const auto cuda = torch::TensorOptions().device(torch::kCUDA);
      const auto flat = params.to(cuda).clone(), grads = earlier.to(cuda).clone();
      std::vector<torch::nn::Linear> layers;
      int handed = 0;  // gradients autograd handed to the weights (hooks)
      at = 0;
      for (auto out : outs) {
        torch::nn::Linear layer(torch::nn::LinearOptions(in, out).bias(false));
        layer->to(torch::kCUDA);
        layer->weight.set_data(flat.narrow(0, at, out * in).view({out, in}));
        if (buffer) layer->weight.mutable_grad() = grads.narrow(0, at, out * in).view({out, in});
        muster::test::count_handed(layer->weight, handed);
        layers.push_back(layer);
        at += out * in;
      }
      auto x = x0.to(cuda).requires_grad_(true);
      torch::Tensor y;
      {
        muster::engine::model::autocast_scope mixed(
            muster::engine::model::autocast_state::bf16(bf16));
        y = muster::engine::ops::joined_linear(x, layers);
      }
      REQUIRE(y.defined());
      CHECK(y.scalar_type() == (bf16 ? torch::kBFloat16 : torch::kFloat32));
      (y.to(torch::kFloat32) * g.to(cuda)).sum().backward();
      torch::cuda::synchronize();
      // bf16: inputs and outputs rounded to 8 bits, sums in fp32
      const double tol = bf16 ? 3e-2 : 1e-4;
      CHECK(handed == (buffer ? 0 : 3));
      CHECK(relative_error(y, y64.detach()) <= tol);
      CHECK(x.grad().scalar_type() == torch::kFloat32);
      CHECK(relative_error(x.grad(), x64.grad()) <= tol);
      at = 0;
      for (std::size_t i = 0; i < layers.size(); ++i) {
        INFO("projection " << i);
        const auto& grad = layers[i]->weight.grad();
        REQUIRE(grad.defined());
        CHECK(grad.scalar_type() == torch::kFloat32);
        auto added = grad;
        if (buffer) {  // still the buffer, holding the earlier sum plus this backward's
          CHECK(grad.data_ptr() == grads.narrow(0, at, 1).data_ptr());
          added = grad - earlier.narrow(0, at, outs[i] * in).view({outs[i], in}).to(cuda);
        }
        CHECK(relative_error(added, w64[i].grad()) <= tol);
        at += outs[i] * in;
      }
    }
}

// grouped_linear on the GPU (engine/ops/grouped_linear_op.hpp) with its weights and gradients laid
// out as an FSDP experts' unit lays them (views of one flat buffer at one stride): in fp32 the
// wgrad is added into the gradients by the product itself, under bf16 autocast the node casts
// the weights in one kernel a projection and adds its bf16 wgrad into the fp32 gradients; both
// against a linear per expert in fp64 on the CPU, the gradients holding an earlier sum already;
// by every method of train.expert_gemm.
// Without a CUDA device (or with a LibTorch without CUDA): "SKIPPED: no CUDA device".
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "engine/model/autocast_scope.hpp"
#include "engine/ops/grouped_linear_op.hpp"
#include "engine/ops/wgrad_operands.hpp"
#include "tests/engine/count_handed.hpp"
#include "tests/engine/expert_layout.hpp"
#include "tests/engine/relative_error.hpp"

namespace ops = muster::engine::ops;
using muster::test::relative_error;

TEST_CASE("grouped_linear on the GPU casts once and adds its wgrad in place, as fp64 says",
          "[gpu][grouped_linear_op]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  torch::manual_seed(21);
  const std::int64_t in = 96, out = 80, experts = 8;
  // counts the wgrad pads to one common reduction, and counts out of balance, where each
  // expert's reduction is its own (for sm90: its count rounded up to 64)
  for (const auto& rows : std::vector<std::vector<std::int64_t>>{{130, 0, 77, 256, 1, 64, 190, 33},
                                                                 {900, 0, 5, 3, 1, 64, 10, 33}}) {
    const bool common = ops::common_reduction(rows, out, in) > 0;
    INFO((common ? "one common reduction" : "each expert's own reduction"));
    CHECK(common == (rows[0] == 130));
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    const auto step = 3 * out * in;  // gate, up, down of an expert: the gate's stride
    const auto params = torch::randn({experts * step}) * 0.1;
    const auto earlier = torch::randn({experts * step});
    const auto x0 = torch::randn({total, in}), g = torch::randn({total, out});

    // fp64 on the CPU: a linear per expert, its weight gradient added to the earlier sum
    std::vector<torch::Tensor> want_w, want_grad;
    auto x64 = x0.to(torch::kFloat64).requires_grad_(true);
    std::vector<torch::Tensor> w64;
    for (std::int64_t e = 0; e < experts; ++e)
      w64.push_back(params.narrow(0, e * step, out * in)
                        .view({out, in})
                        .to(torch::kFloat64)
                        .requires_grad_(true));
    std::vector<torch::Tensor> ys;
    std::int64_t at = 0;
    for (std::int64_t e = 0; e < experts; ++e) {
      ys.push_back(torch::linear(x64.narrow(0, at, rows[std::size_t(e)]), w64[std::size_t(e)]));
      at += rows[std::size_t(e)];
    }
    const auto y64 = torch::cat(ys);
    (y64 * g.to(torch::kFloat64)).sum().backward();

    using method = muster::kernels::cuda::grouped_gemm_method;
    // sm90: the own Hopper kernel for the bf16 forward where the device has it, else automatic
    std::vector<method> methods{method::automatic, method::per_group, method::split_batched,
                                method::sm90};
#ifdef MUSTER_WITH_CUDA
    if (muster::kernels::cuda::grouped_batched_available())
      methods.push_back(method::grouped_batched);
#endif
    for (const auto how : methods)
      for (const bool bf16 : {false, true}) {
        INFO((bf16 ? "bf16 autocast" : "fp32")
             << ", method " << int(how) << " (train.expert_gemm)");
        const auto cuda = torch::TensorOptions().device(torch::kCUDA);
        const auto flat = params.to(cuda).clone(), grads = earlier.to(cuda).clone();
        std::vector<torch::Tensor> w;
        int handed = 0;  // gradients autograd handed to the weights (hooks): none, added in place
        for (std::int64_t e = 0; e < experts; ++e) {
          auto p = flat.narrow(0, e * step, out * in).view({out, in}).detach().requires_grad_(true);
          p.mutable_grad() = grads.narrow(0, e * step, out * in).view({out, in});
          muster::test::count_handed(p, handed);
          w.push_back(p);
        }
        auto x = x0.to(cuda).requires_grad_(true);
        torch::Tensor y;
        {
          muster::engine::model::autocast_scope mixed(
              muster::engine::model::autocast_state::bf16(bf16));
          y = ops::grouped_linear(x, rows, w, how);
        }
        CHECK(y.scalar_type() == (bf16 ? torch::kBFloat16 : torch::kFloat32));
        (y.to(torch::kFloat32) * g.to(cuda)).sum().backward();
        torch::cuda::synchronize();
        // bf16: inputs and outputs rounded to 8 bits, sums in fp32
        const double tol = bf16 ? 3e-2 : 1e-4;
        CHECK(handed == 0);
        CHECK(relative_error(y, y64.detach()) <= tol);
        CHECK(relative_error(x.grad(), x64.grad()) <= tol);
        for (std::int64_t e = 0; e < experts; ++e) {
          INFO("expert " << e << " with " << rows[std::size_t(e)] << " rows");
          // still the unit's buffer, holding the earlier sum plus this backward's
          CHECK(w[std::size_t(e)].grad().data_ptr() == grads.narrow(0, e * step, 1).data_ptr());
          const auto before = earlier.narrow(0, e * step, out * in).view({out, in});
          const auto added = w[std::size_t(e)].grad() - before.to(cuda);
          if (rows[std::size_t(e)] == 0)
            CHECK(added.abs().max().item<double>() == 0.0);
          else
            CHECK(relative_error(added, w64[std::size_t(e)].grad()) <= tol);
        }
      }
  }
}

// Each expert's gate and up projections end to end (their FSDP unit's layout): one product with
// both stacked (projections = 2), by every method, under bf16 autocast too, where the node casts
// both at once and adds the bf16 wgrad into both fp32 gradients over their stacked view, or
// (no gradients yet) hands each weight its share; against the two projections run apart on the
// GPU in fp32.
TEST_CASE("grouped_linear on the GPU stacks each expert's gate and up into one product",
          "[gpu][grouped_linear_op]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  torch::manual_seed(22);
  const std::int64_t in = 96, out = 80, experts = 6;
  const std::vector<std::int64_t> rows{130, 0, 77, 256, 1, 190};
  std::int64_t total = 0;
  for (auto r : rows) total += r;
  const muster::test::expert_layout layout{experts, out, in};
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const auto params = torch::randn({experts * layout.step()}, cuda) * 0.1;
  const auto earlier = torch::randn({experts * layout.step()}, cuda);
  const auto x0 = torch::randn({total, in}, cuda), g = torch::randn({total, 2 * out}, cuda);
  // want: the gate's and the up's products apart, fp32
  const auto gate = layout.apart(params, 0), up = layout.apart(params, 1);
  auto xw = x0.clone().requires_grad_(true);
  const auto want =
      torch::cat({ops::grouped_linear(xw, rows, gate), ops::grouped_linear(xw, rows, up)}, 1);
  (want * g).sum().backward();
  using method = muster::kernels::cuda::grouped_gemm_method;
  // sm90: the own Hopper kernel for the bf16 forward where the device has it, else automatic
  std::vector<method> methods{method::automatic, method::per_group, method::split_batched,
                              method::sm90};
#ifdef MUSTER_WITH_CUDA
  if (muster::kernels::cuda::grouped_batched_available())
    methods.push_back(method::grouped_batched);
#endif
  for (const auto how : methods)
    for (const bool bf16 : {false, true})
      for (const bool in_place : {true, false}) {  // false: the gradients handed back
        INFO((bf16 ? "bf16 autocast" : "fp32")
             << ", method " << int(how) << (in_place ? ", in place" : ""));
        const auto flat = params.clone(), grads = earlier.clone();
        int handed = 0;  // gradients autograd handed to the weights (hooks)
        const auto gate_up = layout.gate_up(flat, in_place ? grads : torch::Tensor(), handed);
        auto x = x0.clone().requires_grad_(true);
        torch::Tensor y;
        {
          muster::engine::model::autocast_scope mixed(
              muster::engine::model::autocast_state::bf16(bf16));
          y = ops::grouped_linear(x, rows, gate_up, how, /*projections=*/2);
        }
        (y.to(torch::kFloat32) * g).sum().backward();
        torch::cuda::synchronize();
        CHECK(handed == (in_place ? 0 : 2 * experts));
        const double tol = bf16 ? 3e-2 : 1e-4;
        CHECK(relative_error(y, want.detach()) <= tol);
        CHECK(relative_error(x.grad(), xw.grad()) <= tol);
        for (std::int64_t e = 0; e < experts; ++e) {
          INFO("expert " << e << " with " << rows[std::size_t(e)] << " rows");
          for (std::int64_t p = 0; p < 2; ++p) {
            const auto at = layout.at(e, p);
            const auto& w = gate_up[std::size_t(2 * e + p)];
            const auto added =
                w.grad() - (in_place ? earlier.narrow(0, at, out * in).view({out, in}) : 0 * w);
            const auto& apart = (p == 0 ? gate : up)[std::size_t(e)].grad();
            if (rows[std::size_t(e)] == 0)
              CHECK(added.abs().max().item<double>() == 0.0);
            else
              CHECK(relative_error(added, apart) <= tol);
          }
        }
      }
}

// The engine's CUDA ops on a device that is not the current one (engine/ops/kernel_tensors.hpp's
// on_device_of): tensors on cuda:1 while cuda:0 is current give what the CPU gives. Needs two
// GPUs: "SKIPPED: no second CUDA device" otherwise (and "no CUDA device" without any).
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include <cmath>

#include "engine/ops/optimizer_ops.hpp"
#include "engine/ops/rms_norm_op.hpp"
#include "engine/ops/router_op.hpp"
#include "engine/ops/swiglu_op.hpp"

namespace ops = muster::engine::ops;

TEST_CASE("the CUDA ops run on the tensors' device, not the current one", "[gpu]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  if (torch::cuda::device_count() < 2) {
    WARN("SKIPPED: no second CUDA device");
    return;
  }
  const torch::Device second(torch::kCUDA, 1);  // cuda:0 stays current
  torch::manual_seed(51);
  const auto x = torch::randn({300, 96}), w = torch::randn({96});
  CHECK(torch::allclose(ops::rms_norm(x.to(second), w.to(second), 1e-6).cpu(),
                        ops::rms_norm(x, w, 1e-6), 1e-5, 1e-5));
  const auto gate_up = torch::randn({300, 2 * 48});
  CHECK(torch::allclose(ops::swiglu_rows(gate_up.to(second)).cpu(), ops::swiglu_rows(gate_up), 1e-5,
                        1e-6));
  const auto logits = torch::randn({500, 64});
  const auto on_second = ops::route_topk(logits.to(second), 4, false, true);
  const auto on_cpu = ops::route_topk(logits, 4, false, true);
  CHECK(on_second.experts.device() == second);
  CHECK(on_second.experts.cpu().equal(on_cpu.experts));
  CHECK(torch::allclose(on_second.weights.cpu(), on_cpu.weights, 1e-5, 1e-6));
  // one call over shards on both devices and the host: each device's sums come back apart
  const auto a = torch::randn({4099}), b = torch::randn({777}), c = torch::randn({5});
  const auto got = ops::sums_of_squares(
      {a.to(torch::Device(torch::kCUDA, 0)), b.to(second), c, b.to(second).to(torch::kFloat64)});
  const auto want = ops::sums_of_squares({a, b, c, b.to(torch::kFloat64)});
  REQUIRE(got.size() == 4);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-9 * want[i]);
}

// The engine tests' normalised error: the largest difference between `got` and `want` over want's
// largest magnitude, in fp64 on the CPU (either tensor on any device, in any float dtype). The GPU
// tests use it, and the CPU tests whose products oneDNN may sum in another order.
#pragma once

#include <torch/torch.h>

#include <algorithm>

namespace muster::test {

inline double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  const auto wanted = want.to(torch::kCPU, torch::kFloat64);
  const auto diff = (got.to(torch::kCPU, torch::kFloat64) - wanted).abs().max().item<double>();
  return diff / std::max(wanted.abs().max().item<double>(), 1e-30);
}

}  // namespace muster::test

// The experts' weights as their FSDP unit lays them, for the grouped_linear tests: each expert's
// gate, up and down projections end to end in one flat buffer (out x in each here), so the
// experts' gates lie at one stride and each expert's gate and up end to end.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tests/engine/count_handed.hpp"

namespace muster::test {

struct expert_layout {
  std::int64_t experts, out, in;
  std::int64_t step() const { return 3 * out * in; }  // an expert's gate, up and down
  std::int64_t at(std::int64_t e, std::int64_t projection) const {
    return e * step() + projection * out * in;
  }

  // Projection p (0 gate, 1 up) of every expert, copied out of `params` as separate leaves.
  std::vector<torch::Tensor> apart(const torch::Tensor& params, std::int64_t p) const {
    std::vector<torch::Tensor> ws;
    for (std::int64_t e = 0; e < experts; ++e)
      ws.push_back(params.narrow(0, at(e, p), out * in).view({out, in}).clone().requires_grad_());
    return ws;
  }

  // Each expert's gate and up, in turn, as leaves viewing `flat`, their gradients views of
  // `grads` where it is defined (an FSDP unit's buffers), each counting into `handed` the
  // gradients autograd hands it (a hook).
  std::vector<torch::Tensor> gate_up(const torch::Tensor& flat, const torch::Tensor& grads,
                                     int& handed) const {
    std::vector<torch::Tensor> ws;
    for (std::int64_t e = 0; e < experts; ++e)
      for (std::int64_t p = 0; p < 2; ++p) {
        auto w = flat.narrow(0, at(e, p), out * in).view({out, in}).detach().requires_grad_(true);
        if (grads.defined()) w.mutable_grad() = grads.narrow(0, at(e, p), out * in).view({out, in});
        count_handed(w, handed);
        ws.push_back(w);
      }
    return ws;
  }
};

}  // namespace muster::test

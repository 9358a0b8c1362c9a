// Whether a node's backward may add its weights' gradients to where they already are (an FSDP
// unit's gradient buffer) rather than hand them to autograd: no AccumulateGrad a weight, and no
// sum in a temporary. The engine's products over several weights (grouped_linear_op.hpp,
// linear_op.hpp) ask it.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

// Every weight a leaf that requires a gradient, with its gradient there, contiguous, of its
// dtype, shape and device; and no graph of the backward wanted (create_graph would need
// autograd's sums).
inline bool grads_in_place(const std::vector<torch::Tensor>& weights) {
  if (torch::GradMode::is_enabled()) return false;
  for (const auto& w : weights) {
    const auto& g = w.grad();
    if (!w.is_leaf() || !w.requires_grad() || !g.defined() || !g.is_contiguous() ||
        g.scalar_type() != w.scalar_type() || g.device() != w.device() || g.sizes() != w.sizes())
      return false;
  }
  return true;
}

}  // namespace muster::engine::ops

// Whether a node's backward may add its weights' gradients to where they already are (an FSDP
// unit's gradient buffer) rather than hand them to autograd: no AccumulateGrad a weight, and no
// sum in a temporary. The engine's products over several weights (grouped_linear_op.hpp,
// linear_op.hpp) ask it.
#pragma once

#include <vector>

#include <torch/csrc/autograd/graph_task.h>
#include <torch/torch.h>

namespace muster::engine::ops {

// Every weight a leaf that requires a gradient, with its gradient there, contiguous, of its
// dtype, shape and device; no graph of the backward wanted (create_graph would need autograd's
// sums); and a backward that accumulates into .grad: not torch::autograd::grad() or
// backward(inputs=...), which capture or select gradients (their graph task lists the nodes it
// runs) and must leave .grad alone.
inline bool grads_in_place(const std::vector<torch::Tensor>& weights) {
  if (torch::GradMode::is_enabled()) return false;
  if (const auto* selected = torch::autograd::get_current_graph_task_exec_info();
      selected && !selected->empty())
    return false;
  for (const auto& w : weights) {
    if (!w.is_leaf() || !w.requires_grad()) return false;
    const auto& g = w.grad();
    if (!g.defined() || !g.is_contiguous() || g.scalar_type() != w.scalar_type() ||
        g.device() != w.device() || g.sizes() != w.sizes())
      return false;
  }
  return true;
}

}  // namespace muster::engine::ops

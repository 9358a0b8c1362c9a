// Activation recompute: see recompute.hpp. A hand-made autograd node, because the closure and
// the saved inputs must live exactly as long as the graph (a torch::autograd::Function keeps
// only IValues).
#include "engine/model/recompute.hpp"

#include "engine/model/autocast_scope.hpp"

#include <torch/csrc/autograd/functions/utils.h>

namespace muster::engine::model {
namespace {

using torch::autograd::variable_list;

struct recompute_node : torch::autograd::Node {
  recompute_fn f;
  variable_list inputs;          // detached: the node owns no graph of its own inputs
  std::vector<bool> wants_grad;  // which inputs needed a gradient in forward
  autocast_state autocast;       // forward's, replayed (bf16 matmuls again under bf16)

  std::string name() const override { return "muster::RecomputeBackward"; }

  variable_list apply(variable_list&& grads) override {
    variable_list leaves;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      leaves.push_back(inputs[i].detach().requires_grad_(wants_grad[i]));
    torch::AutoGradMode enable(true);
    variable_list outs;
    {
      autocast_scope same(autocast);
      outs = f(leaves);
    }
    variable_list roots, root_grads;
    for (std::size_t i = 0; i < outs.size() && i < grads.size(); ++i) {
      if (outs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outs[i]);
        root_grads.push_back(grads[i]);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);
    variable_list result;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      result.push_back(wants_grad[i] ? leaves[i].grad() : torch::Tensor());
    return result;
  }

  void release_variables() override {
    inputs.clear();
    f = nullptr;
  }
};

}  // namespace

variable_list recompute(recompute_fn f, const variable_list& inputs) {
  variable_list outs;
  {
    torch::NoGradGuard no_grad;
    outs = f(inputs);
  }
  bool any = false;
  for (const auto& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any || !torch::GradMode::is_enabled()) return outs;
  auto node = std::shared_ptr<recompute_node>(new recompute_node(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (const auto& t : inputs) {
    node->inputs.push_back(t.detach());
    node->wants_grad.push_back(t.requires_grad());
  }
  node->f = std::move(f);
  node->autocast = autocast_state::current();
  for (auto& o : outs)
    if (o.defined() && torch::autograd::isDifferentiableType(o.scalar_type()))
      torch::autograd::set_history(o, node);
  return outs;
}

}  // namespace muster::engine::model

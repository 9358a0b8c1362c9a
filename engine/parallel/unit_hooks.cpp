// Gather and reduce points in backward: see unit_hooks.hpp.
#include "engine/parallel/unit_hooks.hpp"

namespace muster::engine::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

unit_group* group_of(AutogradContext* ctx) {
  return reinterpret_cast<unit_group*>(ctx->saved_data["group"].toInt());
}

struct before_group_backward : torch::autograd::Function<before_group_backward> {
  static variable_list forward(AutogradContext* ctx, std::int64_t group, at::TensorList outputs) {
    ctx->saved_data["group"] = group;
    variable_list same;
    for (const auto& t : outputs) same.push_back(t.view_as(t));
    return same;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = group_of(ctx);
    if (g->params_in_backward) g->gather();
    if (auto* next = g->backward_next; next && next->params_in_backward) next->prefetch();
    g->begin_backward();
    variable_list out{torch::Tensor()};
    for (auto& grad : grads) out.push_back(grad);
    return out;
  }
};

struct after_group_backward : torch::autograd::Function<after_group_backward> {
  static torch::Tensor forward(AutogradContext* ctx, std::int64_t group, const torch::Tensor& x) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = group_of(ctx);
    g->end_backward();
    g->release();
    return {torch::Tensor(), grads[0]};
  }
};

}  // namespace

void unit_group::gather() {
  for (auto* u : units) u->gather();
}
void unit_group::prefetch() {
  for (auto* u : units) u->prefetch();
}
void unit_group::release() {
  for (auto* u : units) u->release();
}
void unit_group::begin_backward() {
  for (auto* u : units) u->begin_backward();
}
void unit_group::end_backward() {
  if (reducing) {
    if (reducing->group && reducing->group != this) reducing->group->finish_reduce();
    reducing->group = this;
  }
  for (auto* u : units) u->end_backward();
}
void unit_group::finish_reduce() {
  for (auto* u : units) u->finish_reduce();
}

variable_list mark_outputs(unit_group* group, const variable_list& outputs) {
  // As a TensorList: a variable_list argument would not count as tensors, and the outputs
  // would come back detached.
  return before_group_backward::apply(reinterpret_cast<std::int64_t>(group),
                                      at::TensorList(outputs));
}

torch::Tensor mark_input(unit_group* group, const torch::Tensor& input) {
  return after_group_backward::apply(reinterpret_cast<std::int64_t>(group), input);
}

}  // namespace muster::engine::parallel

// The linear layers over the kernels' gemm(): see linear_op.hpp.
#include "engine/ops/linear_op.hpp"

#include "engine/ops/autocast_query.hpp"

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/gemm.hpp"

namespace muster::engine::ops {
namespace {

using kernels::cpu::gemm;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (..., n) as (rows, n), contiguous
torch::Tensor as_rows(const torch::Tensor& t) {
  return t.reshape({-1, t.size(-1)}).contiguous();
}

struct linear_function : torch::autograd::Function<linear_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    const auto rows = as_rows(x);
    const auto n = rows.size(0), in = weight.size(1), out = weight.size(0);
    auto y = torch::empty({n, out}, x.options());
    if (n > 0)
      gemm(false, true, n, out, in, 1.0f, rows.data_ptr<float>(), in, weight.data_ptr<float>(), in,
           0.0f, y.data_ptr<float>(), out);
    ctx->save_for_backward({rows, weight});
    auto shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& rows = saved[0];
    const auto& weight = saved[1];
    const auto g = as_rows(grads[0]);
    const auto n = rows.size(0), in = weight.size(1), out = weight.size(0);
    torch::Tensor grad_x, grad_w;
    if (ctx->needs_input_grad(0)) {
      grad_x = torch::empty({n, in}, g.options());
      if (n > 0)
        gemm(false, false, n, in, out, 1.0f, g.data_ptr<float>(), out, weight.data_ptr<float>(), in,
             0.0f, grad_x.data_ptr<float>(), in);
      auto shape = grads[0].sizes().vec();
      shape.back() = in;
      grad_x = grad_x.view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      grad_w = n > 0 ? torch::empty({out, in}, weight.options())
                     : torch::zeros({out, in}, weight.options());
      if (n > 0)
        gemm(true, false, out, in, n, 1.0f, g.data_ptr<float>(), out, rows.data_ptr<float>(), in,
             0.0f, grad_w.data_ptr<float>(), in);
    }
    return {grad_x, grad_w};
  }
};

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  if (bias.defined() || !cpu_kernel_takes(weight) || weight.dim() != 2 || !cpu_fp32(x) ||
      x.dim() < 1 || x.size(-1) != weight.size(1) || autocast_on(at::kCPU))
    return torch::nn::functional::linear(x, weight, bias);
  return linear_function::apply(x, weight);
}

}  // namespace muster::engine::ops

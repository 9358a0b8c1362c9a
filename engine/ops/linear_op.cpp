// The linear layers over the kernels' gemm(): see linear_op.hpp.
#include "engine/ops/linear_op.hpp"

#include "common/error.hpp"
#include "engine/ops/autocast_query.hpp"
#include "engine/ops/grads_in_place.hpp"
#include "engine/ops/kernel_tensors.hpp"
#include "engine/ops/stacked_view.hpp"
#include "muster/kernels/gemm.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (..., n) as (rows, n), contiguous
torch::Tensor as_rows(const torch::Tensor& t) {
  return t.reshape({-1, t.size(-1)}).contiguous();
}

// c = op(a) op(b) + beta c, op a transpose where asked; a and b contiguous, c a contiguous
// (m, n). fp32 CPU tensors take the kernels' gemm(), others torch's mm (c in a's dtype).
void product(const torch::Tensor& a, bool trans_a, const torch::Tensor& b, bool trans_b,
             torch::Tensor& c, float beta) {
  const auto m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
  if (k == 0) {  // no rows to sum over
    if (beta == 0) c.zero_();
    return;
  }
  if (cpu_kernel_takes(a) && cpu_kernel_takes(b) && cpu_kernel_takes(c)) {
    if (m > 0 && n > 0)
      kernels::cpu::gemm(trans_a, trans_b, m, n, k, 1.0f, a.data_ptr<float>(), a.size(1),
                         b.data_ptr<float>(), b.size(1), beta, c.data_ptr<float>(), n);
    return;
  }
  const auto op_a = trans_a ? a.t() : a, op_b = trans_b ? b.t() : b;
  if (beta == 0)
    at::mm_out(c, op_a, op_b);
  else
    c.addmm_(op_a, op_b);
}

// The weights as one (out, in) matrix in `dtype` (their joined_rows view, or its cast).
torch::Tensor joined_in(const std::vector<torch::Tensor>& weights, torch::ScalarType dtype) {
  const auto all = joined_rows(weights);
  MUSTER_CHECK(all.defined(), errc::internal,
               "linear: {} weights no longer lie one after another in one storage", weights.size());
  return all.scalar_type() == dtype ? all : all.to(dtype);
}

// y = x W^T for W the weights' rows one after another (one weight, or several laid so in one
// storage): one product forward and one a gradient backward. The weights come as a TensorList,
// the one argument form autograd takes apart into inputs. They may be in another dtype than x
// (fp32 weights under bf16 autocast): the node casts them itself, and casts them again for the
// dgrad rather than keeping the cast (an unsharded copy from forward to backward).
struct linear_function : torch::autograd::Function<linear_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList weights) {
    const auto rows = as_rows(x);
    const auto w = joined_in(weights.vec(), x.scalar_type());
    auto y = torch::empty({rows.size(0), w.size(0)}, x.options());
    product(rows, false, w, true, y, 0);
    std::vector<torch::Tensor> saved{x};  // x, not its rows: a double backward reaches x
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    auto shape = x.sizes().vec();
    shape.back() = w.size(0);
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto rows = as_rows(saved[0]);
    const std::vector<torch::Tensor> weights(saved.begin() + 1, saved.end());
    const auto g = as_rows(grads[0]);
    const auto in = rows.size(1), out = g.size(1);
    variable_list result(1 + weights.size());
    if (torch::GradMode::is_enabled()) {  // create_graph: torch's ops, so the gradients have one
      const auto w = torch::cat(weights).to(rows.scalar_type());
      auto shape = grads[0].sizes().vec();
      shape.back() = in;
      if (ctx->needs_input_grad(0)) result[0] = g.mm(w).view(shape);
      hand_back(ctx, g.t().mm(rows), weights, result);
      return result;
    }
    if (ctx->needs_input_grad(0)) {
      auto grad_x = torch::empty({rows.size(0), in}, g.options());
      product(g, false, joined_in(weights, rows.scalar_type()), false, grad_x, 0);
      auto shape = grads[0].sizes().vec();
      shape.back() = in;
      result[0] = grad_x.view(shape);
    }
    bool any_weight = false;
    for (std::size_t i = 0; i < weights.size(); ++i) any_weight |= ctx->needs_input_grad(1 + i);
    if (!any_weight) return result;
    // dW = dy^T x: straight into the weights' gradients where they lie as the weights do and
    // are of the rows' dtype (nothing for autograd to add), else a buffer added to them (one
    // kernel) or handed back in pieces
    std::vector<torch::Tensor> targets;
    if (grads_in_place(weights))
      for (const auto& w : weights) targets.push_back(w.grad());
    auto joined_grads = targets.empty() ? torch::Tensor() : joined_rows(targets);
    torch::NoGradGuard no_grad;
    if (joined_grads.defined() && joined_grads.scalar_type() == g.scalar_type()) {
      product(g, true, rows, false, joined_grads, 1);
      return result;
    }
    auto grad_w = torch::empty({out, in}, g.options());
    product(g, true, rows, false, grad_w, 0);
    if (joined_grads.defined()) {
      joined_grads.add_(grad_w);
      return result;
    }
    hand_back(ctx, grad_w, weights, result);
    return result;
  }

  // Each weight's rows of grad_w, in its dtype, as its gradient for autograd.
  static void hand_back(AutogradContext* ctx, const torch::Tensor& grad_w,
                        const std::vector<torch::Tensor>& weights, variable_list& result) {
    std::int64_t first = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const auto n = weights[i].size(0);
      if (ctx->needs_input_grad(1 + i))
        result[1 + i] = grad_w.narrow(0, first, n).to(weights[i].scalar_type());
      first += n;
    }
  }
};

// Whether the node takes x, in `dtype` (its dtype, or autocast's it is to be cast to), and the
// weights (laid one after another, joined_rows): fp32 CPU tensors, or CUDA ones of one dtype or
// (`autocast`) fp32 weights.
bool node_takes(const torch::Tensor& x, torch::ScalarType dtype,
                const std::vector<torch::Tensor>& weights, bool autocast) {
  if (x.dim() < 1 || !(cpu_fp32(x) || x.is_cuda())) return false;
  const auto all = joined_rows(weights);
  if (!all.defined() || all.device() != x.device() || all.size(1) != x.size(-1)) return false;
  if (x.is_cpu()) return cpu_kernel_takes(all) && !autocast;
  return all.scalar_type() == dtype || (autocast && all.scalar_type() == torch::kFloat32);
}

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  if (bias.defined() || !x.is_cpu() ||
      !node_takes(x, x.scalar_type(), {weight}, autocast_on(at::kCPU)))
    return torch::nn::functional::linear(x, weight, bias);
  return linear_function::apply(x, torch::TensorList(weight));
}

torch::Tensor joined_linear(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers) {
  std::vector<torch::Tensor> weights;
  for (const auto& layer : layers) {
    if (layer->bias.defined()) return {};
    weights.push_back(layer->weight);
  }
  if (x.is_cuda() && autocast_on(at::kCUDA)) {
    // what autocast does to a linear: x in its dtype (a differentiable cast, made only once the
    // node takes them), the weights cast by the node
    const auto dtype = autocast_dtype(at::kCUDA);
    if (!node_takes(x, dtype, weights, /*autocast=*/true)) return {};
    return linear_function::apply(x.to(dtype), torch::TensorList(weights));
  }
  if (!node_takes(x, x.scalar_type(), weights, x.is_cpu() && autocast_on(at::kCPU))) return {};
  return linear_function::apply(x, torch::TensorList(weights));
}

}  // namespace muster::engine::ops

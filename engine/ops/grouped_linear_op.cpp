// The experts' linear layers over the grouped GEMM kernel: see grouped_linear_op.hpp.
#include "engine/ops/grouped_linear_op.hpp"

#include <algorithm>
#include <numeric>

#include "engine/ops/autocast_query.hpp"
#include "engine/ops/grads_in_place.hpp"

#include "common/error.hpp"
#include "engine/ops/kernel_tensors.hpp"
#include "engine/ops/stacked_view.hpp"
#include "engine/ops/wgrad_operands.hpp"
#include "muster/kernels/grouped_gemm.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"

namespace muster::engine::ops {
namespace {

using kernels::gemm_group;
using kernels::grouped_gemm_args;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::gemm_dtype dtype_of(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? kernels::gemm_dtype::bf16 : kernels::gemm_dtype::f32;
}

using kernels::cuda::grouped_gemm_method;

// The groups' products on the tensors' device (`method` on a GPU).
void run(const std::vector<gemm_group>& groups, const grouped_gemm_args& args,
         const torch::Tensor& on, grouped_gemm_method method) {
  if (on.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
    kernels::cuda::grouped_gemm(groups.data(), static_cast<int>(groups.size()), args,
                                kernel_stream(on), method);
#else
    (void)method;
#endif
  } else {
    kernels::cpu::grouped_gemm(groups.data(), static_cast<int>(groups.size()), args);
  }
}

// Whether the products over `x` go to the sm90 kernel: `method` says so, x is bf16 (the
// kernel's one dtype) on a GPU that has it and the build has it.
bool sm90_runs(grouped_gemm_method method, const torch::Tensor& x) {
#ifdef MUSTER_WITH_CUDA
  return method == grouped_gemm_method::sm90 && x.is_cuda() &&
         x.scalar_type() == torch::kBFloat16 && kernels::cuda::sm90_available();
#else
  (void)method, (void)x;
  return false;
#endif
}

// The wgrad through the sm90 kernel where it takes it (the caller's sm90_runs): `groups` with
// each expert's rows of x itself (those past x's end read as zeros by the kernel, where cuBLAS
// reads them from the tail copy, wgrad_operands) over the padded dy^T's columns (each
// expert's reduction, or the common one, a multiple of the kernel's step). False (nothing run)
// where it does not.
bool wgrad_sm90(const std::vector<gemm_group>& groups, grouped_gemm_args args,
                const torch::Tensor& x) {
#ifdef MUSTER_WITH_CUDA
  if (groups.empty()) return false;
  args.same_storage = true;  // dy^T, x, the gradients' buffer (not `direct`): one tensor each
  args.b_view_rows = x.size(0);
  if (!kernels::as_row_views(groups.data(), int(groups.size()), args)) return false;
  run(groups, args, x, grouped_gemm_method::sm90);
  return true;
#else
  (void)groups, (void)args, (void)x;
  return false;
#endif
}

// Pointers as bytes: the groups do not care for the element type.
char* at_row(const torch::Tensor& t, std::int64_t r) {
  return static_cast<char*>(t.data_ptr()) + r * t.size(1) * t.element_size();
}

// The weights in the rows' dtype, each expert's `projections` of them as one block (its weights
// end to end, (projections * out, in)): themselves, or (bf16 autocast) their casts, made by one
// kernel over all of them where the blocks lie at one stride in one storage (stacked_view), as
// an expert layer's weights do in their FSDP unit, else one a block. A block's address is its
// first weight's, or comes from the stacked cast by arithmetic: a tensor a block (unbind, a
// view) costs ATen ops on the host, 64 and more of a layer's 32 experts every forward and
// backward.
struct weights_in_dtype {
  torch::Tensor stacked;            // (E, projections * out, in), or undefined
  std::vector<torch::Tensor> each;  // where not stacked: a block's first weight, or its cast
  void* at(std::size_t e) const {
    if (!stacked.defined()) return each[e].data_ptr();
    return static_cast<char*>(stacked.data_ptr()) +
           std::int64_t(e) * stacked.stride(0) * stacked.element_size();
  }
};

weights_in_dtype in_dtype(const std::vector<torch::Tensor>& weights, std::int64_t projections,
                          torch::ScalarType dtype) {
  const auto per = std::size_t(projections);
  weights_in_dtype out;
  if (weights[0].scalar_type() == dtype) {
    for (std::size_t i = 0; i < weights.size(); i += per) out.each.push_back(weights[i]);
    return out;
  }
  if (auto all = stacked_view(weights, int(projections)); all.defined()) {
    out.stacked = all.to(dtype);
    return out;
  }
  for (std::size_t i = 0; i < weights.size(); i += per)
    out.each.push_back(per == 1 ? weights[i].to(dtype)
                                : torch::cat(torch::TensorList(weights).slice(i, per)).to(dtype));
  return out;
}

// grouped_gemm_args::same_storage for the forward and the dgrad over `x`, whose rows (x and y,
// dy and dx) are one tensor each: whether the weights are too (cast stacked, or stacked
// already). Only the sm90 kernel reads it, and only where it runs (sm90_runs) is the look paid.
bool one_storage_each(grouped_gemm_method method, const torch::Tensor& x,
                      const weights_in_dtype& used, const std::vector<torch::Tensor>& weights,
                      std::int64_t projections) {
  return sm90_runs(method, x) &&
         (used.stacked.defined() || stacked_view(weights, int(projections)).defined());
}

// Adds `sums` (E, projections * out, in), in any dtype, to the gradients `targets` (each
// expert's `projections` in turn): one kernel over their stacked view where they have one,
// else one a gradient.
void add_to_grads(const std::vector<torch::Tensor>& targets, std::int64_t projections,
                  const torch::Tensor& sums) {
  torch::NoGradGuard no_grad;
  if (auto all = stacked_view(targets, int(projections)); all.defined()) {
    all.add_(sums);
    return;
  }
  const auto each = targets[0].size(0);
  for (std::size_t i = 0; i < targets.size(); ++i)
    targets[i].add_(
        sums[std::int64_t(i) / projections].narrow(0, std::int64_t(i) % projections * each, each));
}

// The weights come as a TensorList, the one argument form autograd takes apart into inputs
// (a std::vector would be taken as a constant). They may be in another dtype than x (fp32
// weights under bf16 autocast): the node casts them itself, so autograd has no cast node and no
// gradient cast back per weight.
struct grouped_linear_function : torch::autograd::Function<grouped_linear_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               std::vector<std::int64_t> rows, torch::TensorList weights,
                               std::int64_t method, std::int64_t projections) {
    const auto in = x.size(1), out = projections * weights[0].size(0);
    const auto used = in_dtype(weights.vec(), projections, x.scalar_type());
    auto y = torch::empty({x.size(0), out}, x.options());
    std::vector<gemm_group> groups;
    std::int64_t r = 0;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      groups.push_back({rows[e], out, in, at_row(x, r), in, used.at(e), in, at_row(y, r), out});
      r += rows[e];
    }
    grouped_gemm_args args;
    args.trans_b = true;
    args.dtype = dtype_of(x);
    args.same_storage =
        one_storage_each(grouped_gemm_method(method), x, used, weights.vec(), projections);
    run(groups, args, x, grouped_gemm_method(method));
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["rows"] = c10::IValue(rows);
    ctx->saved_data["method"] = method;
    ctx->saved_data["projections"] = projections;
    // The casts are made again for the dgrad, from the weights as backward sees them (gathered
    // again under optim_grads_params), rather than kept: every MoE layer's experts in bf16
    // from forward to backward would be the unsharded copy FSDP is there to avoid.
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const std::vector<torch::Tensor> weights(saved.begin() + 1, saved.end());
    const auto projections = ctx->saved_data["projections"].toInt();
    // as forward found them (a unit gathered again in backward lays them out the same)
    MUSTER_CHECK(projections == 1 || end_to_end(weights, int(projections)), errc::internal,
                 "grouped_linear: an expert's {} projections no longer lie end to end",
                 projections);
    const auto used = in_dtype(weights, projections, x.scalar_type());
    const auto rows = ctx->saved_data["rows"].toIntVector();
    const auto method = grouped_gemm_method(ctx->saved_data["method"].toInt());
    const auto grad_y = grads[0].contiguous();
    const auto in = x.size(1), out = grad_y.size(1);
    const auto experts = static_cast<std::int64_t>(rows.size());
    auto grad_x = torch::empty_like(x);
    // wgrad: added straight into the weights' gradients where the rows' dtype is theirs (no
    // gradient handed to autograd, so no accumulation node a weight); else into one buffer of
    // the rows' dtype, then added (one kernel over a stacked view) or handed back
    // (with several projections an expert, where their gradients lie end to end as they do)
    std::vector<torch::Tensor> weight_grads;
    if (grads_in_place(weights))
      for (const auto& w : weights) weight_grads.push_back(w.grad());
    const bool in_place =
        !weight_grads.empty() && (projections == 1 || end_to_end(weight_grads, int(projections)));
    const bool direct = in_place && weights[0].scalar_type() == x.scalar_type();
    // the wgrad through sm90: not `direct` (its sums added to each weight's own bf16 gradient:
    // beta 1 into bf16, which the kernel does not take, and no word of one storage)
    const bool sm90_wgrad = !direct && sm90_runs(method, x);
    // the wgrad reads dy transposed, each expert's reduction padded with zeros to an aligned
    // length (for sm90 a multiple of its step of k), on a GPU to one common length where that
    // adds little (wgrad_operands.hpp)
    static_assert(kCommonAlign % kernels::kRowViewsStepK == 0, "a common reduction sm90 takes");
    // (x's rows for cuBLAS, and their tail copy, only once sm90 has not taken the wgrad)
    auto w_in = padded_by_expert(grad_y, x, rows, x.is_cuda() ? common_reduction(rows, out, in) : 0,
                                 sm90_wgrad ? kernels::kRowViewsStepK : kColumnAlign, !sm90_wgrad);
    const auto padded = w_in.dy_t.size(1);
    // dW_e (out, in) = dyT_e (out, k_e) x_e (k_e, in) into dw_of(e), for the experts with rows;
    // of_x: B from x itself, not the tail copy (wgrad_sm90)
    const auto wgrad_groups = [&](const auto& dw_of, bool of_x) {
      std::vector<gemm_group> out_groups;
      std::int64_t start = 0;
      for (std::size_t e = 0; e < rows.size(); ++e) {
        if (rows[e] > 0) {
          const auto* dy_t_e = static_cast<const char*>(w_in.dy_t.data_ptr()) +
                               w_in.first[e] * w_in.dy_t.element_size();
          out_groups.push_back({out, in, w_in.k[e], dy_t_e, padded,
                                of_x ? at_row(x, start) : w_in.x_rows[e], in, dw_of(e), in});
        }
        start += rows[e];
      }
      return out_groups;
    };
    std::vector<gemm_group> dgrad;
    std::int64_t r = 0;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      // dx_e (rows, in) = dy_e (rows, out) W_e (out, in)
      dgrad.push_back(
          {rows[e], in, out, at_row(grad_y, r), out, used.at(e), in, at_row(grad_x, r), in});
      r += rows[e];
    }
    grouped_gemm_args args;
    args.dtype = dtype_of(x);
    args.same_storage = one_storage_each(method, x, used, weights, projections);
    run(dgrad, args, x, method);
    args.same_storage = false;  // x's rows and its tail copy (wgrad_operands) are two
    // bf16 rows into fp32 gradients lying at one stride: the sm90 kernel adds its fp32 sums to
    // them itself (no bf16 buffer, no add, no rounding between)
    bool added = false;
    if (sm90_wgrad && in_place)
      if (const auto all = stacked_view(weight_grads, int(projections));
          all.defined() && all.scalar_type() == torch::kFloat32) {
        auto into = args;
        into.c_f32 = true;
        into.beta = 1.0f;
        added = wgrad_sm90(wgrad_groups(
                               [&](std::size_t e) -> void* {
                                 return static_cast<char*>(all.data_ptr()) +
                                        std::int64_t(e) * all.stride(0) * all.element_size();
                               },
                               true),
                           into, x);
      }
    // Otherwise: an expert with no rows has no wgrad product, so nothing to add in place, and a
    // zero in the buffer, cleared at once (an empty product a group cleared its own: a memset
    // each, about 470 a step in the ~1B bench's steps 5-6 on the H200)
    const bool any_empty = std::find(rows.begin(), rows.end(), 0) != rows.end();
    const auto grad_buffer = direct || added ? torch::Tensor()
                             : any_empty     ? torch::zeros({experts, out, in}, x.options())
                                             : torch::empty({experts, out, in}, x.options());
    if (!added) {
      const auto dw_of = [&](std::size_t e) -> void* {
        return direct ? weight_grads[e * std::size_t(projections)].data_ptr()
                      : static_cast<char*>(grad_buffer.data_ptr()) +
                            std::int64_t(e) * out * in * grad_buffer.element_size();
      };
      args.beta = direct ? 1.0f : 0.0f;
      if (!sm90_wgrad || !wgrad_sm90(wgrad_groups(dw_of, true), args, x)) {
        if (sm90_wgrad) read_x_rows(w_in, x, rows);
        run(wgrad_groups(dw_of, false), args, x, method);
      }
    }
    // x's gradient, none for rows, the weights', none for the method
    variable_list result{grad_x, torch::Tensor()};
    if (!in_place) {
      const auto each = weights[0].size(0);  // a projection's rows of an expert's block
      for (std::size_t i = 0; i < weights.size(); ++i)
        result.push_back(grad_buffer[std::int64_t(i) / projections]
                             .narrow(0, std::int64_t(i) % projections * each, each)
                             .to(weights[i].scalar_type()));
    } else {
      if (!direct && !added) add_to_grads(weight_grads, projections, grad_buffer);
      result.resize(result.size() + weights.size());  // added already: nothing for autograd to add
    }
    result.resize(result.size() + 2);  // none for the method, the projections
    return result;
  }
};

// Under autocast the weights may be in another dtype than x (fp32 weights, bf16 rows: the node
// casts them); otherwise they must be x's, as a linear's must.
bool grouped_kernel_takes(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                          bool autocast) {
  const auto takes = [&](const torch::Tensor& t) {
    if (x.is_cuda()) return cuda_kernel_takes(t, {torch::kFloat32, torch::kBFloat16});
    return cpu_kernel_takes(t);
  };
  if (!takes(x) || x.dim() != 2) return false;
  for (const auto& w : weights)
    if (!takes(w) || w.dim() != 2 || w.scalar_type() != weights[0].scalar_type() ||
        (!autocast && w.scalar_type() != x.scalar_type()) || w.device() != x.device() ||
        w.size(1) != x.size(1) || w.size(0) != weights[0].size(0))
      return false;
  return true;
}

// A linear per expert over one split (its backward is one cat of the experts' gradients); with
// several projections an expert, its weights joined by a cat (through autograd).
torch::Tensor per_expert(const torch::Tensor& x, const std::vector<std::int64_t>& rows,
                         const std::vector<torch::Tensor>& weights, std::int64_t projections) {
  std::vector<torch::Tensor> joined;
  for (std::size_t i = 0; i < weights.size(); i += std::size_t(projections))
    joined.push_back(projections == 1 ? weights[i]
                                      : torch::cat(torch::TensorList(weights).slice(
                                            i, std::size_t(projections))));
  const auto pieces = x.split_with_sizes(rows);
  std::vector<torch::Tensor> ys;
  for (std::size_t e = 0; e < joined.size(); ++e)
    if (rows[e] != 0) ys.push_back(torch::linear(pieces[e], joined[e]));
  // No rows: still an output of x, so the backward of what produced x runs (a collective).
  if (ys.empty()) return torch::linear(x, joined[0]);  // x has no rows
  return ys.size() == 1 ? ys[0] : torch::cat(ys);
}

}  // namespace

bool projections_end_to_end(const std::vector<torch::Tensor>& weights, int projections) {
  return end_to_end(weights, projections);
}

torch::Tensor grouped_linear(const torch::Tensor& x, const std::vector<std::int64_t>& rows,
                             const std::vector<torch::Tensor>& weights, grouped_gemm_method method,
                             int projections) {
  MUSTER_CHECK(projections >= 1 && !weights.empty() &&
                   weights.size() == rows.size() * std::size_t(projections),
               errc::internal, "grouped_linear: {} weights for {} experts' rows, {} a expert",
               weights.size(), rows.size(), projections);
  MUSTER_CHECK(projections == 1 || projections_end_to_end(weights, projections), errc::internal,
               "grouped_linear: each expert's {} projections must lie end to end", projections);
  const auto on_device = on_device_of(x);
  const auto total = std::accumulate(rows.begin(), rows.end(), std::int64_t(0));
  MUSTER_CHECK(x.dim() == 2 && x.size(0) == total, errc::internal,
               "grouped_linear: {} rows of x, the experts' rows add up to {}",
               x.dim() == 2 ? x.size(0) : -1, total);
  const auto p = std::int64_t{projections};
  if ((x.is_cpu() || x.is_cuda()) && autocast_on(x.device().type())) {
    // What autocast does to a linear: rows and weights in its dtype (the weights' cast is
    // differentiable, so their fp32 gradient comes back through it). bf16 on the CPU takes a
    // linear per expert (the CPU kernel is fp32).
    const auto dtype = autocast_dtype(x.device().type());
    const auto xc = x.to(dtype).contiguous();
    if (grouped_kernel_takes(xc, weights, /*autocast=*/true))  // the node casts the weights
      return grouped_linear_function::apply(xc, rows, torch::TensorList(weights),
                                            static_cast<std::int64_t>(method), p);
    std::vector<torch::Tensor> cast;
    for (const auto& w : weights) cast.push_back(w.to(dtype));
    return per_expert(xc, rows, cast, p);
  }
  if (grouped_kernel_takes(x, weights, /*autocast=*/false))
    return grouped_linear_function::apply(x, rows, torch::TensorList(weights),
                                          static_cast<std::int64_t>(method), p);
  return per_expert(x, rows, weights, p);
}

}  // namespace muster::engine::ops

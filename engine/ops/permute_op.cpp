// The token permutation over the permutation kernels: see permute_op.hpp.
#include "engine/ops/permute_op.hpp"

#include <ATen/Parallel.h>

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/permute.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements per task when rows are split over threads.
constexpr std::int64_t kPermuteGrain = 1 << 14;

kernels::permute_shape shape_of(std::int64_t tokens, int topk, std::int64_t hidden) {
  kernels::permute_shape s;
  s.num_tokens = tokens;
  s.topk = topk;
  s.num_experts = 1;  // not read by the row kernels
  s.hidden = hidden;
  return s;
}

std::int64_t grain_rows(std::int64_t hidden) {
  return std::max<std::int64_t>(1, kPermuteGrain / std::max<std::int64_t>(1, hidden));
}

// rows -> tokens with weights (null: 1); y is (tokens, hidden), of rows' dtype.
void combine(const torch::Tensor& rows, const token_permutation& p, const float* weights,
             torch::Tensor& y) {
  const auto h = y.size(1);
  const auto* row_of = p.row_of.data_ptr<std::int64_t>();
  with_element_type(rows, [&](auto type) {
    using T = decltype(type);
    const T* r = elements<T>(rows);
    T* out = elements<T>(y);
    if (y.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
      kernels::cuda::unpermute(r, row_of, weights, out, shape_of(p.num_tokens, p.topk, h),
                               kernel_stream(y));
#endif
      return;
    }
    at::parallel_for(0, p.num_tokens, grain_rows(h * p.topk), [&](std::int64_t b, std::int64_t e) {
      kernels::cpu::unpermute(r, row_of + b * p.topk, weights ? weights + b * p.topk : nullptr,
                              out + b * h, shape_of(e - b, p.topk, h));
    });
  });
}

struct permute_function : torch::autograd::Function<permute_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const token_permutation& p) {
    const auto h = x.size(1);
    auto out = torch::empty({p.num_rows, h}, x.options());
    const auto* source = p.source_of.data_ptr<std::int64_t>();
    with_element_type(x, [&](auto type) {
      using T = decltype(type);
      const T* in = elements<T>(x);
      T* o = elements<T>(out);
      if (x.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::permute_rows(in, source, p.num_rows, o, shape_of(p.num_tokens, p.topk, h),
                                    kernel_stream(x));
#endif
        return;
      }
      at::parallel_for(0, p.num_rows, grain_rows(h), [&](std::int64_t b, std::int64_t e) {
        kernels::cpu::permute_rows(in, source + b, e - b, o + b * h,
                                   shape_of(p.num_tokens, p.topk, h));
      });
    });
    ctx->saved_data["row_of"] = p.row_of;
    ctx->saved_data["tokens"] = p.num_tokens;
    ctx->saved_data["topk"] = static_cast<std::int64_t>(p.topk);
    ctx->saved_data["dtype"] = x.scalar_type();
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    token_permutation p;
    p.row_of = ctx->saved_data["row_of"].toTensor();
    p.num_tokens = ctx->saved_data["tokens"].toInt();
    p.topk = static_cast<int>(ctx->saved_data["topk"].toInt());
    const auto grad = grads[0].to(ctx->saved_data["dtype"].toScalarType()).contiguous();
    auto grad_x = torch::empty({p.num_tokens, grad.size(1)}, grad.options());
    combine(grad, p, nullptr, grad_x);
    return {grad_x, torch::Tensor()};
  }
};

struct unpermute_function : torch::autograd::Function<unpermute_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const token_permutation& p, const torch::Tensor& weights) {
    auto y = torch::empty({p.num_tokens, rows.size(1)}, rows.options());
    combine(rows, p, weights.data_ptr<float>(), y);
    ctx->save_for_backward({rows, weights});
    ctx->saved_data["row_of"] = p.row_of;
    ctx->saved_data["topk"] = static_cast<std::int64_t>(p.topk);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& rows = saved[0];
    const auto& weights = saved[1];
    const auto row_of = ctx->saved_data["row_of"].toTensor();
    const int topk = static_cast<int>(ctx->saved_data["topk"].toInt());
    const auto grad_y = grads[0].to(rows.scalar_type()).contiguous();
    const auto tokens = grad_y.size(0), h = grad_y.size(1);
    // rows of dropped assignments do not exist; every row belongs to one assignment
    auto grad_rows = torch::empty_like(rows);
    auto grad_weights = torch::empty_like(weights);
    const float* w = weights.data_ptr<float>();
    float* gw = grad_weights.data_ptr<float>();
    const auto* row = row_of.data_ptr<std::int64_t>();
    with_element_type(rows, [&](auto type) {
      using T = decltype(type);
      const T *r = elements<T>(rows), *g = elements<T>(grad_y);
      T* gr = elements<T>(grad_rows);
      if (rows.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::unpermute_backward(r, row, w, g, gr, gw, shape_of(tokens, topk, h),
                                          kernel_stream(rows));
#endif
        return;
      }
      at::parallel_for(0, tokens, grain_rows(h * topk), [&](std::int64_t b, std::int64_t e) {
        kernels::cpu::unpermute_backward(r, row + b * topk, w + b * topk, g + b * h, gr,
                                         gw + b * topk, shape_of(e - b, topk, h));
      });
    });
    return {grad_rows, torch::Tensor(), grad_weights};
  }
};

#ifdef MUSTER_WITH_CUDA
// On the GPU: the index there, and the counts and the row count brought back (one small copy,
// which waits for the stream: the experts' row counts size the grouped products).
token_permutation permute_index_on_device(const torch::Tensor& experts, std::int64_t num_experts) {
  token_permutation p;
  p.num_tokens = experts.size(0);
  p.topk = static_cast<int>(experts.size(1));
  const auto flat = experts.reshape({-1}).to(torch::kInt64).contiguous();
  kernels::permute_shape s;
  s.num_tokens = p.num_tokens;
  s.topk = p.topk;
  s.num_experts = num_experts;
  auto counts_offsets = torch::empty({2 * num_experts + 1}, flat.options());
  p.row_of = torch::empty({flat.numel()}, flat.options());
  auto source = torch::empty({flat.numel()}, flat.options());
  auto scratch = torch::empty({kernels::cuda::permute_index_scratch_bytes(s)},
                              flat.options().dtype(torch::kUInt8));
  kernels::cuda::permute_index(
      flat.data_ptr<std::int64_t>(), counts_offsets.data_ptr<std::int64_t>(),
      counts_offsets.data_ptr<std::int64_t>() + num_experts, p.row_of.data_ptr<std::int64_t>(),
      source.data_ptr<std::int64_t>(), scratch.data_ptr(), s, kernel_stream(flat));
  const auto host = counts_offsets.to(torch::kCPU);
  p.counts = host.narrow(0, 0, num_experts).clone();
  p.num_rows = host.data_ptr<std::int64_t>()[2 * num_experts];
  p.source_of = source.narrow(0, 0, p.num_rows);
  return p;
}
#endif

}  // namespace

token_permutation permute_index(const torch::Tensor& experts, std::int64_t num_experts) {
  const auto on_device = on_device_of(experts);
#ifdef MUSTER_WITH_CUDA
  if (experts.is_cuda()) return permute_index_on_device(experts, num_experts);
#endif
  token_permutation p;
  p.num_tokens = experts.size(0);
  p.topk = static_cast<int>(experts.size(1));
  const auto flat = experts.reshape({-1}).to(torch::kCPU, torch::kInt64).contiguous();
  const auto n = flat.numel();
  p.counts = torch::empty({num_experts}, flat.options());
  auto offsets = torch::empty({num_experts + 1}, flat.options());
  p.row_of = torch::empty({n}, flat.options());
  auto source = torch::empty({n}, flat.options());
  kernels::permute_shape s;
  s.num_tokens = p.num_tokens;
  s.topk = p.topk;
  s.num_experts = num_experts;
  kernels::cpu::permute_index(flat.data_ptr<std::int64_t>(), p.counts.data_ptr<std::int64_t>(),
                              offsets.data_ptr<std::int64_t>(), p.row_of.data_ptr<std::int64_t>(),
                              source.data_ptr<std::int64_t>(), s);
  p.num_rows = offsets.data_ptr<std::int64_t>()[num_experts];
  p.source_of = source.narrow(0, 0, p.num_rows);
  const auto device = experts.device();
  if (!device.is_cpu()) {
    p.row_of = p.row_of.to(device);
    p.source_of = p.source_of.to(device);
  }
  return p;
}

// The kernels take contiguous tensors of `dtypes` on the CPU, or on the GPU with the index there
// too.
bool permute_kernel_takes(const torch::Tensor& t, const token_permutation& p,
                          std::initializer_list<torch::ScalarType> dtypes) {
  return (cpu_kernel_takes(t, dtypes) || cuda_kernel_takes(t, dtypes)) &&
         p.row_of.device() == t.device();
}

torch::Tensor permute_rows(const torch::Tensor& x, const token_permutation& p) {
  const auto on_device = on_device_of(x);
  if (permute_kernel_takes(x, p, kFp32AndBf16) && x.dim() == 2)
    return permute_function::apply(x, p);
  return x.index_select(0, torch::div(p.source_of, p.topk, "floor"));
}

torch::Tensor unpermute_rows(const torch::Tensor& rows, const token_permutation& p,
                             const torch::Tensor& weights) {
  const auto on_device = on_device_of(rows);
  if (permute_kernel_takes(rows, p, kFp32AndBf16) && rows.dim() == 2 &&
      permute_kernel_takes(weights, p, {torch::kFloat32}))
    return unpermute_function::apply(rows, p, weights);
  const auto tokens = torch::div(p.source_of, p.topk, "floor");
  const auto w = weights.reshape({-1}).index_select(0, p.source_of).to(rows.scalar_type());
  return torch::zeros({p.num_tokens, rows.size(1)}, rows.options())
      .index_add(0, tokens, rows * w.unsqueeze(1));
}

}  // namespace muster::engine::ops

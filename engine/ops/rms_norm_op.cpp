// RMSNorm over the kernel: see rms_norm_op.hpp.
#include "engine/ops/rms_norm_op.hpp"

#include <ATen/Parallel.h>

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/rms_norm.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per task; the weight's gradient is summed per block of rows, then over blocks in order
// (the same bits whatever the number of threads).
constexpr std::int64_t kRowBlock = 256;

// x fp32 or bf16 (the attention's q and k under bf16 autocast), the weight fp32: y and the
// weight's gradient fp32, x's gradient in x's dtype (muster/kernels/rms_norm.hpp).
struct rms_norm_function : torch::autograd::Function<rms_norm_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps) {
    const auto dim = x.size(-1), rows = x.numel() / dim;
    auto y = torch::empty_like(x, x.options().dtype(torch::kFloat32));
    auto rstd = torch::empty({rows}, y.options());
    const float* pw = weight.data_ptr<float>();
    float *py = y.data_ptr<float>(), *pr = rstd.data_ptr<float>();
    ctx->save_for_backward({x, weight, rstd});
    with_element_type(x, [&](auto type) {
      using T = decltype(type);
      const T* px = elements<T>(x);
      if (x.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::rms_norm_forward(px, pw, float(eps), rows, dim, py, pr, kernel_stream(x));
#else
        TORCH_INTERNAL_ASSERT(false, "rms_norm: CUDA rows, and muster_kernels has no CUDA");
#endif
        return;
      }
      at::parallel_for(0, rows, kRowBlock, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::rms_norm_forward(px + begin * dim, pw, float(eps), end - begin, dim,
                                       py + begin * dim, pr + begin);
      });
    });
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto& rstd = saved[2];
    const auto grad_y = grads[0].to(torch::kFloat32).contiguous();
    const auto dim = x.size(-1), rows = x.numel() / dim;
    auto grad_x = torch::empty_like(x);
    const float *pw = weight.data_ptr<float>(), *pr = rstd.data_ptr<float>(),
                *pg = grad_y.data_ptr<float>();
    if (x.is_cuda()) {
      auto grad_w = torch::zeros_like(weight);
#ifdef MUSTER_WITH_CUDA
      auto partials = torch::empty({kernels::cuda::rms_norm_backward_partials(rows, dim)},
                                   weight.options());
      with_element_type(x, [&](auto type) {
        using T = decltype(type);
        kernels::cuda::rms_norm_backward(elements<T>(x), pw, pr, pg, rows, dim, elements<T>(grad_x),
                                         grad_w.data_ptr<float>(), partials.data_ptr<float>(),
                                         kernel_stream(x));
      });
#else
      TORCH_INTERNAL_ASSERT(false, "rms_norm: CUDA rows, and muster_kernels has no CUDA");
#endif
      return {grad_x, grad_w, torch::Tensor()};
    }
    const auto blocks = (rows + kRowBlock - 1) / kRowBlock;
    auto partial_w = torch::zeros({blocks, dim}, weight.options());
    float* pdw = partial_w.data_ptr<float>();
    with_element_type(x, [&](auto type) {
      using T = decltype(type);
      const T* px = elements<T>(x);
      T* pdx = elements<T>(grad_x);
      at::parallel_for(0, blocks, 1, [&](std::int64_t first, std::int64_t last) {
        for (auto b = first; b < last; ++b) {
          const auto begin = b * kRowBlock, n = std::min(kRowBlock, rows - begin);
          kernels::cpu::rms_norm_backward(px + begin * dim, pw, pr + begin, pg + begin * dim, n,
                                          dim, pdx + begin * dim, pdw + b * dim);
        }
      });
    });
    return {grad_x, blocks == 1 ? partial_w[0] : partial_w.sum(0), torch::Tensor()};
  }
};

// The same over torch's ops, for what the kernels do not take (rows of another dtype or not
// contiguous, a weight other than fp32): one autograd node instead of the eight of the
// formula's ops (casts, pow, mean, add, rsqrt, two products), whose creation and evaluation were
// most of a norm's host time on a GPU, where the step waits for the host. The values are the
// formula's: x in fp32, normed cast back to x's dtype, times the weight (so in the weight's
// dtype where that is wider); the backward is its gradient in fp32.
struct rms_norm_ops_function : torch::autograd::Function<rms_norm_ops_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps) {
    const auto x32 = x.to(torch::kFloat32);
    const auto rstd = torch::rsqrt(x32.square().mean(-1, /*keepdim=*/true) + eps);
    const auto normed = (x32 * rstd).to(x.scalar_type());
    ctx->save_for_backward({x, weight, rstd, normed});
    return weight * normed;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto& rstd = saved[2];
    const auto& normed = saved[3];
    const auto& g = grads[0];
    // y = w n: dw sums g n over every row, dn = g w
    const auto rows = g.numel() / g.size(-1);
    auto grad_w = (g * normed).reshape({rows, g.size(-1)}).sum(0).to(weight.scalar_type());
    const auto grad_n = (g * weight).to(torch::kFloat32);
    // n = x r, r = (mean(x^2) + eps)^-1/2: dx = r (dn - x r^2 mean(dn x))
    const auto x32 = x.to(torch::kFloat32);
    const auto grad_x = rstd * (grad_n - x32 * rstd.square() * (grad_n * x32).mean(-1, true));
    return {grad_x.to(x.scalar_type()), grad_w.reshape(weight.sizes()), torch::Tensor()};
  }
};

bool rms_norm_kernel_takes(const torch::Tensor& x, const torch::Tensor& weight) {
  const bool on_device = (cpu_kernel_takes(x, kFp32AndBf16) && cpu_kernel_takes(weight)) ||
                         (cuda_kernel_takes(x, kFp32AndBf16) && cuda_kernel_takes(weight));
  return on_device && x.device() == weight.device() && x.dim() >= 1 &&
         x.size(-1) == weight.numel() && x.numel() > 0;
}

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const auto on_device = on_device_of(x);
  if (rms_norm_kernel_takes(x, weight)) return rms_norm_function::apply(x, weight, eps);
  return rms_norm_ops_function::apply(x, weight, eps);
}

}  // namespace muster::engine::ops

// silu(gate) * up over the SwiGLU kernel: see swiglu_op.hpp.
#include "engine/ops/swiglu_op.hpp"

#include <ATen/Parallel.h>

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/swiglu.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements per task when a tensor is split over threads.
constexpr std::int64_t kGrain = 1 << 15;

struct swiglu_function : torch::autograd::Function<swiglu_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate,
                               const torch::Tensor& up) {
    ctx->save_for_backward({gate, up});
    auto out = torch::empty_like(gate);
    with_element_type(gate, [&](auto type) {
      using T = decltype(type);
      const T *a = elements<T>(gate), *b = elements<T>(up);
      T* y = elements<T>(out);
      if (gate.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::swiglu_forward(a, b, y, gate.numel(), kernel_stream(gate));
#endif
        return;
      }
      at::parallel_for(0, gate.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::swiglu_forward(a + begin, b + begin, y + begin, end - begin);
      });
    });
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& gate = saved[0];
    const auto& up = saved[1];
    const auto grad_out = grads[0].to(gate.scalar_type()).contiguous();
    auto grad_gate = torch::empty_like(gate), grad_up = torch::empty_like(up);
    with_element_type(gate, [&](auto type) {
      using T = decltype(type);
      const T *a = elements<T>(gate), *b = elements<T>(up), *g = elements<T>(grad_out);
      T *da = elements<T>(grad_gate), *db = elements<T>(grad_up);
      if (gate.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::swiglu_backward(a, b, g, da, db, gate.numel(), kernel_stream(gate));
#endif
        return;
      }
      at::parallel_for(0, gate.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::swiglu_backward(a + begin, b + begin, g + begin, da + begin, db + begin,
                                      end - begin);
      });
    });
    return {grad_gate, grad_up};
  }
};

bool kernel_takes(const torch::Tensor& gate, const torch::Tensor& up) {
  const bool on_device =
      (cpu_kernel_takes(gate, kFp32AndBf16) && cpu_kernel_takes(up, kFp32AndBf16)) ||
      (cuda_kernel_takes(gate, kFp32AndBf16) && cuda_kernel_takes(up, kFp32AndBf16));
  return on_device && gate.device() == up.device() && gate.scalar_type() == up.scalar_type() &&
         gate.sizes() == up.sizes();
}

}  // namespace

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  if (!kernel_takes(gate, up)) return torch::silu(gate) * up;
  return swiglu_function::apply(gate, up);
}

}  // namespace muster::engine::ops

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
constexpr std::int64_t kSwigluGrain = 1 << 15;

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
      at::parallel_for(0, gate.numel(), kSwigluGrain, [&](std::int64_t begin, std::int64_t end) {
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
      at::parallel_for(0, gate.numel(), kSwigluGrain, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::swiglu_backward(a + begin, b + begin, g + begin, da + begin, db + begin,
                                      end - begin);
      });
    });
    return {grad_gate, grad_up};
  }
};

bool swiglu_kernel_takes(const torch::Tensor& gate, const torch::Tensor& up) {
  const bool on_device =
      (cpu_kernel_takes(gate, kFp32AndBf16) && cpu_kernel_takes(up, kFp32AndBf16)) ||
      (cuda_kernel_takes(gate, kFp32AndBf16) && cuda_kernel_takes(up, kFp32AndBf16));
  return on_device && gate.device() == up.device() && gate.scalar_type() == up.scalar_type() &&
         gate.sizes() == up.sizes();
}

// Rows per task when packed rows are split over threads.
constexpr std::int64_t kRowGrain = 64;

struct swiglu_rows_function : torch::autograd::Function<swiglu_rows_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_up) {
    ctx->save_for_backward({gate_up});
    const auto width = gate_up.size(-1) / 2, rows = gate_up.numel() / (2 * width);
    auto shape = gate_up.sizes().vec();
    shape.back() = width;
    auto out = torch::empty(shape, gate_up.options());
    with_element_type(gate_up, [&](auto type) {
      using T = decltype(type);
      const T* gu = elements<T>(gate_up);
      T* y = elements<T>(out);
      if (gate_up.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::swiglu_rows_forward(gu, y, rows, width, kernel_stream(gate_up));
#endif
        return;
      }
      at::parallel_for(0, rows, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::swiglu_rows_forward(gu + begin * 2 * width, y + begin * width, end - begin,
                                          width);
      });
    });
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& gate_up = saved[0];
    const auto grad_out = grads[0].to(gate_up.scalar_type()).contiguous();
    const auto width = gate_up.size(-1) / 2, rows = gate_up.numel() / (2 * width);
    auto grad = torch::empty_like(gate_up);
    with_element_type(gate_up, [&](auto type) {
      using T = decltype(type);
      const T *gu = elements<T>(gate_up), *g = elements<T>(grad_out);
      T* d = elements<T>(grad);
      if (gate_up.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
        kernels::cuda::swiglu_rows_backward(gu, g, d, rows, width, kernel_stream(gate_up));
#endif
        return;
      }
      at::parallel_for(0, rows, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::swiglu_rows_backward(gu + begin * 2 * width, g + begin * width,
                                           d + begin * 2 * width, end - begin, width);
      });
    });
    return {grad};
  }
};

}  // namespace

torch::Tensor swiglu_rows(const torch::Tensor& gate_up) {
  const auto on_device = on_device_of(gate_up);
  const bool takes =
      cpu_kernel_takes(gate_up, kFp32AndBf16) || cuda_kernel_takes(gate_up, kFp32AndBf16);
  if (!takes || gate_up.dim() < 1 || gate_up.size(-1) % 2 != 0 || gate_up.numel() == 0) {
    const auto parts = gate_up.chunk(2, -1);
    return torch::silu(parts[0]) * parts[1];
  }
  return swiglu_rows_function::apply(gate_up);
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  const auto on_device = on_device_of(gate);
  if (!swiglu_kernel_takes(gate, up)) return torch::silu(gate) * up;
  return swiglu_function::apply(gate, up);
}

}  // namespace muster::engine::ops

// Which tensors the CPU kernels behind engine/ops take: contiguous fp32 on the CPU (the one
// check every adapter makes before handing a tensor's pointer to kernels/).
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

// fp32 on the CPU, whatever its strides (adapters that make their inputs contiguous themselves)
inline bool cpu_fp32(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32;
}

inline bool cpu_kernel_takes(const torch::Tensor& t) {
  return cpu_fp32(t) && t.is_contiguous();
}

}  // namespace muster::engine::ops

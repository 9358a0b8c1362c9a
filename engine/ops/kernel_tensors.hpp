// Which tensors the CPU kernels behind engine/ops take: contiguous fp32 on the CPU (the one
// check every adapter makes before handing a tensor's pointer to kernels/).
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

inline bool cpu_kernel_takes(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32 &&
         t.is_contiguous();
}

}  // namespace muster::engine::ops

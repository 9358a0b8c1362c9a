// Tensor adapters over the optimizer kernels (kernels/include/muster/kernels/optimizer.hpp):
// check the tensors, split the buffer over LibTorch's intra-op threads, call the CPU kernel.
// Tensors: contiguous fp32, the same numel, on the CPU; on a CUDA device the CUDA kernels (one
// pass each, on LibTorch's current stream), and torch's ops (the same update, a pass per
// operator) for CUDA tensors the kernels do not take.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "muster/kernels/optimizer.hpp"

namespace muster::engine::ops {

// One AdamW step over flat buffers, in place; `decay_mask` undefined: no weight decay.
void adamw_update(const kernels::adamw_scalars& s, torch::Tensor& param, const torch::Tensor& grad,
                  torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  const torch::Tensor& decay_mask);

// The sum of the squares of each tensor's elements, in fp64. The sums of CUDA tensors come back
// to the host in one copy a device (one wait for each device, however many tensors).
std::vector<double> sums_of_squares(const std::vector<torch::Tensor>& xs);

}  // namespace muster::engine::ops

// y = x W^T (+ b), the engine's linear layers: fp32 CPU tensors without bias run their three
// products (forward, input gradient, weight gradient) through the kernels' gemm() (oneDNN's
// sgemm where built, about 7% faster than LibTorch's OpenBLAS matmul at these shapes, and
// without its dispatch); anything else (bias, bf16 autocast, CUDA until issue 9) takes
// torch's linear.
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

// x is (..., in), weight (out, in), bias (out) or undefined; returns (..., out).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {});

// The same through a module's parameters.
inline torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return linear(x, layer->weight, layer->bias);
}

}  // namespace muster::engine::ops

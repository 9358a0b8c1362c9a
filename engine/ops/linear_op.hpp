// y = x W^T (+ b), the engine's linear layers: fp32 CPU tensors without bias run their three
// products (forward, input gradient, weight gradient) through the kernels' gemm() (oneDNN's
// sgemm where built, about 7% faster than LibTorch's OpenBLAS matmul at these shapes, and
// without its dispatch); anything else (bias, bf16 autocast, CUDA) takes torch's linear.
// Several bias-free layers over one input whose weights lie one after another in one storage
// (joined_linear) take one product, on the CPU and on a GPU.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

// x is (..., in), weight (out, in), bias (out) or undefined; returns (..., out).
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {});

// The same through a module's parameters.
inline torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return linear(x, layer->weight, layer->bias);
}

// The layers' linears at once: (..., out_1 + out_2 + ...), each layer's output beside the one
// before, from one product, where the layers have no bias and their weights lie one after
// another in one storage (their FSDP unit lays a module's parameters so: the q, k and v
// projections, a SwiGLU's gate and up): fp32 on the CPU, or on a GPU (under bf16 autocast x is
// cast once, the weights by one kernel). Backward is one product for x's gradient and one for
// the weights', added straight to their gradients where those lie as the weights do (an FSDP
// unit's buffer: no gradient handed to autograd). Undefined where it does not apply (a bias,
// weights apart, autocast on the CPU): the caller takes each layer's linear.
torch::Tensor joined_linear(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers);

}  // namespace muster::engine::ops

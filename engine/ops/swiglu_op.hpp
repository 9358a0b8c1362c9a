// silu(gate) * up as one autograd function over the SwiGLU kernel
// (kernels/include/muster/kernels/swiglu.hpp): one pass forward, one backward, and only gate
// and up kept for the backward. Contiguous fp32 or bf16 CPU tensors of one shape and dtype take
// the kernel (split over LibTorch's intra-op threads), and such CUDA ones kernels::cuda on
// LibTorch's current stream; bf16 is computed in fp32 and rounded once. Anything else takes
// torch's silu and product.
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

// gate and up are (..., ffn), the same shape; returns silu(gate) * up.
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

// The same over packed rows: gate_up is (..., 2 ffn), each row its gate then its up (one product
// with both projections' weights stacked); returns (..., ffn), and in backward the gradient as
// gate_up is laid out, which the stacked product's backward takes as it is.
torch::Tensor swiglu_rows(const torch::Tensor& gate_up);

}  // namespace muster::engine::ops

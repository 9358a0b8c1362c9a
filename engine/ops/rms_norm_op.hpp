// RMSNorm as one autograd function over the RMSNorm kernel
// (kernels/include/muster/kernels/rms_norm.hpp): x, the weight and one fp32 per row kept for
// the backward. Contiguous fp32 or bf16 x with a contiguous fp32 weight take the kernels: on
// the CPU with the rows split over LibTorch's intra-op threads, on a GPU the CUDA kernels (a
// forward, and three for the backward: grad_x, the weight's sums over blocks of rows, their
// sum). bf16 rows are the attention's q and k under bf16 autocast: on the H200 their norms over
// torch's ops took about 8% of the ~1B step's GPU time and 800 kernels in two steps' backward.
// Anything else (rows of another dtype or not contiguous, a weight other than fp32) takes
// torch's ops inside one autograd function.
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

// x is (..., dim), weight (dim); returns weight * x / sqrt(mean(x^2, -1) + eps), computed in
// fp32, the normalised x rounded to x's dtype before the weight, in the dtype of weight times x
// (fp32 for a bf16 x with fp32 weights).
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace muster::engine::ops

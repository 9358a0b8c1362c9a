// The experts' linear layers as one grouped product: rows of x, expert-contiguous (the
// permutation's order), each times its own expert's weight, y_e = x_e W_e^T, with the backward
// as two grouped products (dgrad dx_e = dy_e W_e, wgrad dW_e = dy_e^T x_e). One autograd node
// and one kernel call per direction, in place of a split, a linear per expert and a cat.
// Contiguous fp32 CPU tensors take kernels::cpu::grouped_gemm; contiguous CUDA tensors, fp32 or
// bf16 (under autocast the rows and the weights are cast to its dtype, as autocast casts a
// linear's), take kernels::cuda::grouped_gemm on the current stream; anything else a linear per
// expert. On the kernel path the node casts the weights itself (one kernel over an expert
// layer's weights where they lie at one stride, as in their FSDP unit: stacked_view.hpp), and
// where the weights' gradients already exist (FSDP's buffers in backward) it adds the wgrad to
// them itself, by the product (beta 1) or one kernel over their stacked view: no cast node, no
// gradient cast back and no accumulation node a weight, which were three small kernels per
// expert and projection. So gradients must come from backward(): torch::autograd::grad over
// the weights while their .grad is defined would add to .grad and return none.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "muster/kernels/grouped_gemm.hpp"

namespace muster::engine::ops {

// x is (R, in) with R = sum(rows); weights[e] is (out, in), expert e's rows are the rows[e]
// after the previous experts'. Returns (R, out). An expert with no rows gets a zero gradient.
// `method`: how a GPU runs the products, forward and backward (train.expert_gemm); the CPU
// kernel has one way. projections > 1: weights holds each expert's `projections` weights in
// turn, lying end to end (projections_end_to_end: an expert's gate and up in its FSDP unit),
// and each expert's product is with them stacked, (projections * out, in): one product for
// both projections, whose rows come back side by side, (R, projections * out).
torch::Tensor grouped_linear(
    const torch::Tensor& x, const std::vector<std::int64_t>& rows,
    const std::vector<torch::Tensor>& weights,
    kernels::cuda::grouped_gemm_method method = kernels::cuda::grouped_gemm_method::automatic,
    int projections = 1);

// Whether each group of `projections` weights (in turn) lies end to end in one storage, as
// grouped_linear's stacked projections must.
bool projections_end_to_end(const std::vector<torch::Tensor>& weights, int projections);

}  // namespace muster::engine::ops

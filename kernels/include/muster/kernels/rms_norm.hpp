// RMSNorm over the last dimension, y = w * (x / sqrt(mean(x^2) + eps)), and its backward, one
// pass over a row each way (torch's ops take seven passes and temporaries forward and more
// backward). Raw pointers and counts; no CUDA or torch types. Rows are independent, so a
// caller may split them over threads (grad_w is accumulated for that). The cuda:: functions
// take every row at once.
#pragma once

#include <cstdint>

#include "muster/kernels/bf16.hpp"

namespace muster::kernels::cpu {

// x and y are (rows, dim), w is (dim), rstd is (rows): 1 / sqrt(mean(x^2) + eps) per row, kept
// for the backward. fp32, sums in fp32 over eight lanes.
void rms_norm_forward(const float* x, const float* w, float eps, std::int64_t rows,
                      std::int64_t dim, float* y, float* rstd);

// Given grad_y (rows, dim): grad_x (rows, dim) = rstd * (gw - xh * mean(gw * xh)) with
// gw = grad_y * w and xh = x * rstd; grad_w (dim) += the sum over rows of grad_y * xh.
void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, float* grad_x, float* grad_w);

// bf16 rows with an fp32 weight (the attention's q and k norms under bf16 autocast): as a bf16
// model's norm with an fp32 weight computes, the normalised row is rounded to bf16, then times
// the weight in fp32: y = w * bf16(x * rstd), fp32. The backward takes grad_y in fp32, sums
// grad_y * bf16(x * rstd) into grad_w and writes the fp32 grad_x above rounded to bf16.
void rms_norm_forward(const bf16* x, const float* w, float eps, std::int64_t rows, std::int64_t dim,
                      float* y, float* rstd);
void rms_norm_backward(const bf16* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, bf16* grad_x, float* grad_w);

}  // namespace muster::kernels::cpu

namespace muster::kernels::cuda {

// The same on the GPU: device pointers, enqueued on `stream` (a cudaStream_t; nullptr: the
// default stream). Built only with CUDA; see kernels/cuda/rms_norm.cu. rows * dim may be 0.
void rms_norm_forward(const float* x, const float* w, float eps, std::int64_t rows,
                      std::int64_t dim, float* y, float* rstd, void* stream);

// The floats of device memory rms_norm_backward needs in `partials` for rows x dim: the weight
// gradient's sums over blocks of rows, added in a fixed order, so the bits do not depend on
// the GPU's scheduling.
std::int64_t rms_norm_backward_partials(std::int64_t rows, std::int64_t dim);

// grad_x as the CPU's; grad_w (dim) += the sum over rows of grad_y * x * rstd.
void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, float* grad_x, float* grad_w,
                       float* partials, void* stream);

// bf16 rows, fp32 weight and outputs, as the CPU's above.
void rms_norm_forward(const bf16* x, const float* w, float eps, std::int64_t rows, std::int64_t dim,
                      float* y, float* rstd, void* stream);
void rms_norm_backward(const bf16* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, bf16* grad_x, float* grad_w,
                       float* partials, void* stream);

}  // namespace muster::kernels::cuda

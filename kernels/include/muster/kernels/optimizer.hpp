// The optimizer's loops over flat fp32 buffers: the AdamW update and the sum of squares
// behind the global gradient norm, each one pass over memory (torch's ops take a pass and a
// temporary per operator: seven passes for AdamW, three and two fp64 copies for the norm).
// Raw pointers and counts; no CUDA or torch types. The cpu:: functions work on any range, so
// a caller may split a buffer over threads; the cuda:: ones (built with the CUDA backend) take
// device pointers and a stream.
#pragma once

#include <cstdint>

namespace muster::kernels {

// One AdamW step's scalars (torch.optim.AdamW's update: decoupled weight decay, bias-corrected
// moments, eps added after the square root).
struct adamw_scalars {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;
  std::int64_t step = 1;  // the step being taken, from 1 (for the bias corrections)
};

namespace cpu {

// For each i < n, in place:
//   param *= 1 - lr * weight_decay * decay_mask[i]         (decay_mask null: no decay)
//   exp_avg = beta1 * exp_avg + (1 - beta1) * grad
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
//   param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
// computed in fp32 as torch does. The buffers must not overlap.
void adamw_update(const adamw_scalars& s, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, const float* decay_mask, std::int64_t n);

// The sum of x[i]^2 for i < n, accumulated in fp64 (in a fixed order: the same bits for the
// same input).
double sum_of_squares(const float* x, std::int64_t n);

}  // namespace cpu

// Doubles of device scratch cuda::sum_of_squares takes (a partial sum a block, and the total).
inline constexpr std::int64_t kSumOfSquaresScratch = 1025;

namespace cuda {

// The same update on the GPU: device pointers, enqueued on `stream` (a cudaStream_t), the same
// fp32 arithmetic as cpu::adamw_update, one pass over the buffers.
void adamw_update(const adamw_scalars& s, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, const float* decay_mask, std::int64_t n, void* stream);

// The sum of x[i]^2 for i < n in fp64, written to scratch[kSumOfSquaresScratch - 1] (device
// memory of kSumOfSquaresScratch doubles), enqueued on `stream`; in a fixed order for a given
// n, so the same input gives the same bits (not the CPU's order: the two differ in the last
// bits).
void sum_of_squares(const float* x, std::int64_t n, double* scratch, void* stream);

}  // namespace cuda
}  // namespace muster::kernels

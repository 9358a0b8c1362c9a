// The denominator of MFU: one rank's peak matmul throughput. train.peak_tflops when the user
// gives it (a datasheet figure); otherwise measured once at start with a square matmul in the
// training dtype on the rank's threads, so on a CPU MFU reads as "share of what this core set
// sustains on a plain GEMM", not of a nominal peak nobody reaches.
#pragma once

#include <torch/torch.h>

namespace muster::engine::train {

// TFLOP/s of `dtype` matmuls on `device` (the CPU: with the current torch thread count;
// about 0.1 s).
double measured_matmul_tflops(torch::Dtype dtype, torch::Device device = torch::kCPU);

}  // namespace muster::engine::train

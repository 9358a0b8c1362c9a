// The experts' wgrad operands, dW_e (out, in) = dy_e^T (out, k_e) x_e (k_e, in), laid out for
// cuBLAS: dy transposed, so that no operand of the products is transposed (cuBLAS ran a grouped
// product with dy_e^T as one kernel an expert, after a heuristic query each: about 1.3 ms of host
// time a layer's projection on an H200), and every expert's reduction k_e its row count rounded
// up to kColumnAlign, the padding zeros in both operands. Its pointer-array kernels assume every
// block starts on 16 bytes (8 bf16 elements); and a reduction that is not a multiple of 8 is the
// contiguous extent of dy^T's blocks, where cuBLAS 13.0 took kernels 30 to 70 times slower than
// a dense product's (gpu_kernels_bench on an H200: 32 groups of 512..2048 rows, 1024 -> 640,
// 1.4% of the dense product's FLOP/s grouped, 11% one a group). The zeros add exact zeros.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

inline constexpr std::int64_t kColumnAlign = 8;

struct wgrad_operands {
  torch::Tensor dy_t;               // (out, padded): expert e's columns from first[e]
  torch::Tensor x;                  // (padded, in): expert e's rows from first[e]
  std::vector<std::int64_t> first;  // expert e's first column and row, a multiple of kColumnAlign
  std::vector<std::int64_t> k;      // expert e's reduction: its count rounded up to kColumnAlign
};

// `dy` (total, out) and `x` (total, in), contiguous, of one device and dtype, their row blocks
// the experts' in order (`counts` rows each). Where every count is a multiple of kColumnAlign:
// x itself and one transposing copy of dy. Else the rows go to their padded places among zeros
// (one index, built on the host and sent to a GPU from pinned memory without waiting for it),
// then dy's transposing copy.
wgrad_operands padded_by_expert(const torch::Tensor& dy, const torch::Tensor& x,
                                const std::vector<std::int64_t>& counts);

}  // namespace muster::engine::ops

// The experts' rows transposed, each expert's block of columns starting on a multiple of
// kColumnAlign elements: what the experts' wgrad reads as dy^T so that no operand of its
// products is transposed. cuBLAS runs a grouped product of untransposed operands as one grouped
// kernel, where with dy_e^T it launched one kernel an expert after a heuristic query each (about
// 1.3 ms of host time a layer's projection on an H200); its pointer-array kernels assume each
// block starts on 16 bytes, hence the padding (8 bf16 elements; 32 bytes in fp32).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

inline constexpr std::int64_t kColumnAlign = 8;

struct expert_columns {
  torch::Tensor t;                  // (width, padded): the padding columns hold copies, unread
  std::vector<std::int64_t> first;  // expert e's first column, a multiple of kColumnAlign
};

// `rows` (total, width), contiguous, its row blocks the experts' in order (`counts` rows each).
// One gather of rows into the padded order (none where every count is already a multiple of
// kColumnAlign) and one transposing copy, on the tensor's device; the gather's index goes to a
// GPU from pinned memory without waiting for it.
expert_columns transposed_by_expert(const torch::Tensor& rows,
                                    const std::vector<std::int64_t>& counts);

}  // namespace muster::engine::ops

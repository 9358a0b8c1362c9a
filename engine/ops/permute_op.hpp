// The MoE block's token permutation as autograd functions over the permutation kernels
// (kernels/include/muster/kernels/permute.hpp): the index of the assignments grouped by expert,
// the gather of token rows into that order, and the weighted combine of the experts' rows back
// into token order (its backward gives the router's weights their gradient). Contiguous fp32 or
// bf16 rows with fp32 weights take the kernels: on the CPU split over LibTorch's intra-op
// threads, on a CUDA device kernels::cuda on LibTorch's current stream (the index there too,
// its counts brought back); bf16 rows are combined in fp32 and rounded once. Others take
// torch's sort, index_select and index_add, which give the same rows.
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

struct token_permutation {
  torch::Tensor counts;     // (E) int64 on the CPU: rows per expert
  torch::Tensor row_of;     // (T * k) int64: each assignment's row, -1 when dropped
  torch::Tensor source_of;  // (rows) int64: each row's assignment (its token: / topk)
  std::int64_t num_tokens = 0;
  std::int64_t num_rows = 0;
  int topk = 1;
};

// experts: (T, k) int64; an expert outside [0, num_experts) is dropped.
token_permutation permute_index(const torch::Tensor& experts, std::int64_t num_experts);

// (rows, H): row r is x[source_of[r] / topk]. x: (T, H).
torch::Tensor permute_rows(const torch::Tensor& x, const token_permutation& p);

// (T, H), of rows' dtype: token t's rows summed, each times its weight (weights: (T, k); fp32
// for the kernels, whatever the rows' dtype).
torch::Tensor unpermute_rows(const torch::Tensor& rows, const token_permutation& p,
                             const torch::Tensor& weights);

}  // namespace muster::engine::ops

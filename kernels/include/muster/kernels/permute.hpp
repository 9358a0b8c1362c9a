// Token permutation for the experts: the assignments of tokens to experts (the router's top-k)
// grouped into expert-contiguous rows, the gather of token rows into that order, and the
// weighted combine of the experts' rows back into token order, with their backwards. Raw
// pointers, row-major, sizes; no CUDA or torch types.
//
// Contract (both backends):
// - An assignment a = t * topk + j is token t's j-th expert, experts[a]; one outside
//   [0, num_experts) is dropped (over capacity) and gets no row.
// - Rows are expert-contiguous, in expert order; within an expert, in assignment order (a
//   stable sort), so the same routing gives the same rows on every backend.
// - row_of[a] is assignment a's row, or -1 when dropped; source_of[r] is row r's assignment
//   (its token is source_of[r] / topk). offsets[e] is expert e's first row, offsets[E] the
//   number of rows.
// - Rows are fp32 or bf16 (the overloads); weights and their gradients are fp32 for both, and
//   the bf16 combines sum in fp32 and round once.
#pragma once

#include <cstdint>

#include "muster/kernels/bf16.hpp"

namespace muster::kernels {

struct permute_shape {
  std::int64_t num_tokens = 0;
  int topk = 1;
  std::int64_t num_experts = 1;
  std::int64_t hidden = 1;  // elements of a token's row
};

// Throws std::invalid_argument when a size is out of range (negative, topk < 1, no experts).
void check_permute_shape(const permute_shape& shape);

namespace cpu {

// counts (E), offsets (E + 1), row_of (T * topk) and source_of (T * topk; the first
// offsets[E] are written) from experts (T * topk).
void permute_index(const std::int64_t* experts, std::int64_t* counts, std::int64_t* offsets,
                   std::int64_t* row_of, std::int64_t* source_of, const permute_shape& shape);

// out[r] = x[source_of[r] / topk], r < num_rows: the tokens' rows in expert order.
void permute_rows(const float* x, const std::int64_t* source_of, std::int64_t num_rows, float* out,
                  const permute_shape& shape);

// y[t] = sum over j of weights[t * topk + j] * rows[row_of[t * topk + j]], dropped ones left
// out; weights null: 1 (the backward of permute_rows: each token's rows summed).
void unpermute(const float* rows, const std::int64_t* row_of, const float* weights, float* y,
               const permute_shape& shape);

// The backward of unpermute: grad_rows[row_of[a]] = weights[a] * grad_y[a / topk], and
// grad_weights[a] = dot(grad_y[a / topk], rows[row_of[a]]) (0 when dropped). grad_weights
// null: not wanted (rows may then be null too); weights null: 1.
void unpermute_backward(const float* rows, const std::int64_t* row_of, const float* weights,
                        const float* grad_y, float* grad_rows, float* grad_weights,
                        const permute_shape& shape);

void permute_rows(const bf16* x, const std::int64_t* source_of, std::int64_t num_rows, bf16* out,
                  const permute_shape& shape);
void unpermute(const bf16* rows, const std::int64_t* row_of, const float* weights, bf16* y,
               const permute_shape& shape);
void unpermute_backward(const bf16* rows, const std::int64_t* row_of, const float* weights,
                        const bf16* grad_y, bf16* grad_rows, float* grad_weights,
                        const permute_shape& shape);

}  // namespace cpu

namespace cuda {

// The same on the GPU: device pointers, enqueued on `stream` (a cudaStream_t). permute_index
// needs scratch of permute_index_scratch_bytes(shape) bytes (device memory).
std::int64_t permute_index_scratch_bytes(const permute_shape& shape);
void permute_index(const std::int64_t* experts, std::int64_t* counts, std::int64_t* offsets,
                   std::int64_t* row_of, std::int64_t* source_of, void* scratch,
                   const permute_shape& shape, void* stream);
void permute_rows(const float* x, const std::int64_t* source_of, std::int64_t num_rows, float* out,
                  const permute_shape& shape, void* stream);
void unpermute(const float* rows, const std::int64_t* row_of, const float* weights, float* y,
               const permute_shape& shape, void* stream);
void unpermute_backward(const float* rows, const std::int64_t* row_of, const float* weights,
                        const float* grad_y, float* grad_rows, float* grad_weights,
                        const permute_shape& shape, void* stream);
void permute_rows(const bf16* x, const std::int64_t* source_of, std::int64_t num_rows, bf16* out,
                  const permute_shape& shape, void* stream);
void unpermute(const bf16* rows, const std::int64_t* row_of, const float* weights, bf16* y,
               const permute_shape& shape, void* stream);
void unpermute_backward(const bf16* rows, const std::int64_t* row_of, const float* weights,
                        const bf16* grad_y, bf16* grad_rows, float* grad_weights,
                        const permute_shape& shape, void* stream);

}  // namespace cuda
}  // namespace muster::kernels

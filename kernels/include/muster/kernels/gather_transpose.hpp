// A matrix's rows gathered and transposed in one pass: dst (cols, dst_cols), whose column j is
// row map[j] of src (rows, cols), or zeros where map[j] < 0. The experts' wgrad reads its output
// gradient so (engine/ops/wgrad_operands: dy^T, each expert's columns from an aligned start,
// zeros between), where torch took a zero fill, a row scatter and a transposing copy (on an
// H200 the copy alone took 256 us a call in the ~1B bench, at about a fifth of a device copy's
// bandwidth). Elements are moved as bits, elem_bytes 2 (bf16) or 4 (fp32): zeros are all-zero
// bits. map null: column j is row j (dst_cols == rows). dst's rows are dst_ld apart, so a caller
// may split dst's columns over threads (map + j0, dst + j0). Raw pointers, row-major, sizes; no
// CUDA or torch types.
#pragma once

#include <cstdint>

namespace muster::kernels {

struct gather_transpose_shape {
  std::int64_t rows = 0;      // src's
  std::int64_t cols = 0;      // src's, so dst's rows
  std::int64_t dst_cols = 0;  // the length of map
  int elem_bytes = 4;
  std::int64_t dst_ld = 0;  // dst's row stride, at least dst_cols; 0: dst_cols

  std::int64_t row_stride() const { return dst_ld ? dst_ld : dst_cols; }
};

// Throws std::invalid_argument when `shape` is not one of the above (a negative size, an
// element of another size, no map where dst_cols != rows, dst_ld under dst_cols, rows past
// int32), or, on the GPU, cols past 2,097,120 (65535 blocks of 32).
void check_gather_transpose(const gather_transpose_shape& shape, const std::int32_t* map);

namespace cpu {

// map's entries are below shape.rows (std::invalid_argument names the first that is not).
void gather_transpose(const void* src, const std::int32_t* map, const gather_transpose_shape& shape,
                      void* dst);

}  // namespace cpu

namespace cuda {

// The same on the GPU: device pointers (map too; its entries are not checked), enqueued on
// `stream` (a cudaStream_t; nullptr: the default stream). Built only with CUDA (MUSTER_WITH_CUDA);
// see kernels/cuda/gather_transpose.cu.
void gather_transpose(const void* src, const std::int32_t* map, const gather_transpose_shape& shape,
                      void* dst, void* stream);

}  // namespace cuda
}  // namespace muster::kernels

// The experts' wgrad operands, dW_e (out, in) = dy_e^T (out, k_e) x_e (k_e, in), laid out for
// cuBLAS: dy transposed, so that no operand of the products is transposed (cuBLAS ran a grouped
// product with dy_e^T as one kernel an expert, after a heuristic query each: about 1.3 ms of host
// time a layer's projection on an H200), each expert's columns starting on a multiple of
// kColumnAlign, and its reduction k_e its row count rounded up to kColumnAlign (or, for the sm90
// kernel, to its 64-wide step: padded_by_expert's `align`). Its pointer-array
// kernels assume every block starts on 16 bytes (8 bf16 elements); and a reduction that is not a
// multiple of 8 is the contiguous extent of dy^T's blocks, where cuBLAS 13.0 took kernels 30 to
// 70 times slower than a dense product's (gpu_kernels_bench on an H200: 32 groups of 512..2048
// rows, 1024 -> 640, 1.4% of the dense product's FLOP/s grouped, 11% one a group).
//
// dy^T's padding columns are zeros. x is read where it is: an expert's k_e rows run into the next
// experts' rows, which meet those zero columns and add exact zeros where they are finite (an Inf
// or NaN there, which makes its own expert's output and so the loss NaN already, makes this
// expert's gradient NaN too). The experts from the first whose k_e rows would run past x's end
// (the last with rows, or several where the last hold few) read a copy of x's rows from there,
// zero rows after.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

inline constexpr std::int64_t kColumnAlign = 8;

// A common reduction for every expert (common_reduction): the largest count rounded up to
// kCommonAlign, so that step after step the products' shapes come from few sizes, whose kernel
// choice cuBLAS keeps; taken where it adds at most kCommonExtraFlops of products (about 150 us
// at the 330 TFLOP/s of the ~1B bench's batched wgrad on an H200) and at most kCommonRowsRatio
// times dy's rows to dy^T.
inline constexpr std::int64_t kCommonAlign = 64;
inline constexpr double kCommonExtraFlops = 5e10;
inline constexpr std::int64_t kCommonRowsRatio = 3;

struct wgrad_operands {
  torch::Tensor dy_t;               // (out, padded): expert e's columns from first[e], zeros after
  std::vector<std::int64_t> first;  // expert e's first column, a multiple of the alignment
  std::vector<std::int64_t> k;      // expert e's reduction: its count rounded up to the
                                    // alignment (kColumnAlign, or sm90's step), or the common one
  std::vector<const void*> x_rows;  // expert e's k[e] rows of x's width, contiguous (read_x_rows)
  torch::Tensor tail;               // x from the first expert that would run past its end, zeros
                                    // after (undefined where none would)
};

// `dy` (total, out) and `x` (total, in), contiguous, of one device and dtype (fp32 or bf16),
// their row blocks the experts' in order (`counts` rows each). dy^T is one pass over dy
// (kernels/gather_transpose), each row to its padded column, zeros between; the map of columns
// to rows is built on the host and sent to a GPU from pinned memory without waiting for it. (On
// the H200 in the ~1B bench, torch's transposing copy took 256 us a call, at about a fifth of a
// device copy's bandwidth, and its row scatter 116 us, besides the zero fill.) x must outlive the
// products. common > 0: the reduction of every expert with rows is `common` (a multiple of
// `align`, no count above it), so their products have one shape. Else each expert's is its count
// rounded up to `align`: kColumnAlign, or a multiple of it (the sm90 kernel's step of k, so that
// none of its steps reaches the next expert's columns). with_x_rows: x_rows (and the tail) too,
// else none until read_x_rows (the sm90 kernel reads x itself, zeros past its end).
wgrad_operands padded_by_expert(const torch::Tensor& dy, const torch::Tensor& x,
                                const std::vector<std::int64_t>& counts, std::int64_t common = 0,
                                std::int64_t align = kColumnAlign, bool with_x_rows = true);

// Fills ops.x_rows for x and the counts ops was made for (padded_by_expert without them): x's
// own rows, and for the experts from the first whose k rows run past x's end, the tail copy.
void read_x_rows(wgrad_operands& ops, const torch::Tensor& x,
                 const std::vector<std::int64_t>& counts);

// The common reduction for the wgrad of experts with these counts, out x in each, on a GPU, or
// 0 where it would add too much (or fewer than two experts have rows). There a product's shapes
// matter to the host: with each reduction its own, cuBLAS's grouped call took 0.4 to 2 ms of
// host time against 0.13 ms of GPU time (gpu_kernels_bench on an H200, 32 experts of ~1024 rows,
// 1024 -> 640, at new counts each call, as a router's are each step), and one batched call of
// one shape it has seen takes tens of microseconds.
std::int64_t common_reduction(const std::vector<std::int64_t>& counts, std::int64_t out,
                              std::int64_t in);

}  // namespace muster::engine::ops

// Grouped matrix products for the experts: group g computes C_g = op(A_g) op(B_g) + beta C_g
// with its own m, n, k and its own matrices, row-major, op(X) = X or X^T for every group alike.
// The experts' forward is one group per expert (rows of that expert times its weight); so are
// the dgrad (rows' gradient times the weight) and the wgrad (the rows' gradient, transposed,
// times the rows: its reduction dimension is the expert's row count). Raw pointers and sizes;
// no CUDA or torch types.
#pragma once

#include <cstdint>

namespace muster::kernels {

// One product: op(A) is (m, k), op(B) is (k, n), C is (m, n); lda, ldb, ldc are the row strides
// as stored. A group with m, n or k zero is skipped (k zero with beta 0 still writes C = 0).
struct gemm_group {
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
};

enum class gemm_dtype { f32, bf16 };  // of A, B and C; products accumulate in fp32

struct grouped_gemm_args {
  bool trans_a = false;
  bool trans_b = false;
  float beta = 0.0f;  // 0: C is only written (its old contents may be NaN)
  gemm_dtype dtype = gemm_dtype::f32;
  // The GPU's split_batched (and automatic where it splits): at most split_levels uniform
  // batches, each a multiple of split_quantum rows (grouped_gemm_split.hpp); both >= 1. A
  // quantum off a multiple of 8 leaves a wgrad's reductions (the engine pads them to 8) off it.
  int split_levels = 3;
  std::int64_t split_quantum = 64;
  // The caller's word that every group's A lies in one allocation, every group's B in one and
  // every C in one (the experts' rows of one tensor, their weights stacked). The sm90 kernel
  // reads each through one view from its lowest group to its highest, rows between groups
  // included, which is safe only then (grouped_gemm_rows.hpp).
  bool same_storage = false;
  // With same_storage, the rows B's allocation holds from its lowest group's start (0: as far as
  // the groups reach). Groups may then reach past it, as the wgrad's last experts' padded rows
  // do past x's end, and those rows count as zeros: only the sm90 kernel reads so (its tensor
  // maps), and cuda::grouped_gemm throws std::invalid_argument where it cannot run them.
  std::int64_t b_view_rows = 0;
  // With dtype bf16: C is fp32, the products (summed in fp32) written into it (beta 0) or added
  // to it (beta 1), as the wgrad into fp32 gradients wants, with no bf16 rounding between. The
  // sm90 kernel's alone: cpu and the cuBLAS methods throw std::invalid_argument.
  bool c_f32 = false;
  // The sm90 kernel's tile width (0: 256 where that covers n in no more columns than 128, else
  // 128; or 128 or 256) and whether its consumers keep one step's products in flight while
  // issuing the next: for the bench and tests to compare them.
  int sm90_tile_n = 0;
  bool sm90_overlap = true;
};

// Throws std::invalid_argument naming the group and the size when a size or stride is out of
// range (negative, a stride under the row it holds, a null pointer of a non-empty matrix), or
// naming the option when split_levels or split_quantum is below 1 or sm90_tile_n is not 0, 128
// or 256.
void check_gemm_groups(const gemm_group* groups, int count, const grouped_gemm_args& args);

// Whether every matrix the groups read or write starts on a 16-byte boundary (groups with m or
// n zero are skipped and count as aligned; with k zero only C is looked at). cuBLAS's
// pointer-array calls (grouped, batched) read their pointers on the GPU and take this for
// granted: on an H200 a group off it stopped the kernel with a misaligned address.
// cuda::grouped_gemm runs such groups one cublasGemmEx each, which sees its pointers.
bool pointers_aligned(const gemm_group* groups, int count);

namespace cpu {

// fp32 only (dtype f32), through cpu::gemm, one group after another.
void grouped_gemm(const gemm_group* groups, int count, const grouped_gemm_args& args);

}  // namespace cpu

namespace cuda {

// How the GPU runs the groups: one cublasGemmGroupedBatchedEx (cuBLAS 12.5 or later), one
// cublasGemmEx a group in order on the stream, or split_batched: the part of the rows (or of
// the reduction) that most groups share as uniform cublasGemmBatchedEx calls and the rest of
// each group grouped (grouped_gemm_split.hpp). automatic takes per_group for large groups (8e9
// FLOPs a group on average, or more); for smaller ones split_batched where its batches hold
// half the FLOPs or more, else grouped_batched where cuBLAS has it
// (kernels/cuda/grouped_gemm.cpp says what was measured). Groups whose matrices are not all
// on 16-byte boundaries (pointers_aligned) run one cublasGemmEx a group, whatever the method.
// sm90: muster's own Hopper kernel (TMA and warpgroup MMA, kernels/cuda/grouped_gemm_sm90.hpp)
// where the groups have the row-grouped form (as_row_views: the experts' forward, dgrad and
// wgrad over one common reduction, in bf16), the
// build has it (architectures with 90) and the device is compute capability 9.0; otherwise as
// automatic. Not yet picked by automatic: it has not run on a GPU (docs/gpu.md).
enum class grouped_gemm_method { automatic, grouped_batched, per_group, split_batched, sm90 };

// The same on the GPU: device pointers, enqueued on `stream` (a cudaStream_t), f32 or bf16.
// A group with k zero takes beta 0 or 1 only here (C cleared or left); others throw.
// cuBLAS is loaded at the first call (libcublas.so.13, else .12: the one PyTorch has already
// loaded is reused); throws std::runtime_error saying so when it cannot be.
void grouped_gemm(const gemm_group* groups, int count, const grouped_gemm_args& args, void* stream,
                  grouped_gemm_method method = grouped_gemm_method::automatic);

// Whether the loaded cuBLAS has cublasGemmGroupedBatchedEx (loads cuBLAS).
bool grouped_batched_available();

// Whether grouped_gemm_method::sm90 can run its own kernel here: built with it, and the current
// device compute capability 9.0.
bool sm90_available();

}  // namespace cuda
}  // namespace muster::kernels

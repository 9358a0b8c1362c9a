// The row-grouped form of a grouped product, as the experts' products have it: every group's A
// and C are blocks of one matrix each and its B a row block of one matrix. The forward: A and
// C the routed rows of one tensor in expert order, B the experts' weights stacked, (n, k) each
// (C = A B^T). The dgrad: the same with B (k, n) (C = A B). The wgrad over the padded dy^T
// (engine/ops/wgrad_operands.hpp): A a block of columns of dy^T, B an expert's k rows of x, C
// its gradient's block (C = A B). A kernel
// then reads every group through one 2-D view of each matrix (the GPU's tensor maps) and needs
// only where each group's rows start. Host-side bookkeeping only, no CUDA: the GPU's own
// grouped kernel (cuda::grouped_gemm_method::sm90) runs from it, and the CPU tests check it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"

namespace muster::kernels {

// The sm90 kernel's step of k: where groups start mid-row in A, or differ in k, each k must be
// a multiple of it (as_row_views).
inline constexpr std::int64_t kRowViewsStepK = 64;

// Where one group starts in each view (in rows; A's also in columns), its rows and its
// reduction (k: the views' k, or its own where the groups' differ).
struct row_group {
  std::int64_t a_row = 0, b_row = 0, c_row = 0, m = 0;
  std::int64_t a_col = 0;
  std::int64_t k = 0;
};

// One view per matrix: A (a_rows, a_cols) at row stride lda, B (b_rows, k) at ldb (b_k_major: a
// group's B^T, n rows) or (b_rows, n) (a group's B, k rows), C (c_rows, n) at ldc, each
// starting at the lowest address a group uses. Reads past a view's rows or columns are zeros
// (the GPU's tensor maps).
struct row_views {
  const void* a = nullptr;
  std::int64_t a_rows = 0, a_cols = 0, lda = 0;
  const void* b = nullptr;
  std::int64_t b_rows = 0, ldb = 0;
  bool b_k_major = true;  // args.trans_b
  void* c = nullptr;
  std::int64_t c_rows = 0, ldc = 0;
  bool c_f32 = false;         // args.c_f32: C fp32, else bf16
  bool c_accumulate = false;  // C += the products (beta 1, fp32 C only), else C = them
  std::int64_t n = 0, k = 0;  // k: the largest group's
  std::vector<row_group> groups;  // the groups with m > 0, in their order
};

// The views, where the groups have that form: args.same_storage (the caller's word that each
// view is one allocation: a kernel reading rows between two groups must not leave it), bf16
// (C too, or fp32 with args.c_f32), A not transposed, beta 0 (or 1 into an fp32 C), one n >= 1
// and one lda, ldb and ldc for all, k >= 1 and one for all or each a multiple of 64 (the
// wgrad's reductions padded by expert: no step of the kernel reaches past a group's k, where
// the view's zeros are not), strides multiples of 8 elements (16 bytes) and none under the row
// it holds, every view starting on a 16-byte boundary, B's and C's matrices a whole number of
// rows from their view's start, A's a row and a column with its k columns inside the row, k a
// multiple of 64 where a group's A starts past a row's first column (the kernel's steps of k
// must not reach the next group's columns), every view under 2^31 rows and columns. B's rows
// are as far as the groups reach, or args.b_view_rows where given (>= 0; groups may reach past
// it, those rows read as zeros, but none may start there). Otherwise none, and `why` (when
// given) names the first condition that failed. Groups with m zero are left out; none left
// gives views with no groups. The groups' C blocks must not overlap (as for every method).
std::optional<row_views> as_row_views(const gemm_group* groups, int count,
                                      const grouped_gemm_args& args, std::string* why = nullptr);

}  // namespace muster::kernels

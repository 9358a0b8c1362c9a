// The row-grouped form of a grouped product: see muster/kernels/grouped_gemm_rows.hpp.
#include "muster/kernels/grouped_gemm_rows.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace muster::kernels {
namespace {

constexpr std::int64_t kElementBytes = 2;   // bf16
constexpr std::int64_t kStrideQuantum = 8;  // elements: 16 bytes, the tensor maps' stride unit
constexpr std::int64_t kMaxRows = std::numeric_limits<std::int32_t>::max();

std::optional<row_views> refuse(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return std::nullopt;
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The row of `p` in the view starting at `base` with row stride `ld` (of `element_bytes`), or
// -1 where p is not a whole number of rows from it.
std::int64_t row_of(const void* p, const void* base, std::int64_t ld,
                    std::int64_t element_bytes = kElementBytes) {
  const auto bytes = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base);
  const auto row_bytes = static_cast<std::uintptr_t>(ld * element_bytes);
  return bytes % row_bytes == 0 ? static_cast<std::int64_t>(bytes / row_bytes) : -1;
}

// The element of `p` in the view from `base`: its row and column, or row -1 where p is not a
// whole number of elements from it.
std::pair<std::int64_t, std::int64_t> element_of(const void* p, const void* base, std::int64_t ld) {
  const auto bytes = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base);
  if (bytes % kElementBytes != 0) return {-1, 0};
  const auto element = static_cast<std::int64_t>(bytes / kElementBytes);
  return {element / ld, element % ld};
}

}  // namespace

std::optional<row_views> as_row_views(const gemm_group* groups, int count,
                                      const grouped_gemm_args& args, std::string* why) {
  if (!args.same_storage) return refuse(why, "not said to be in one allocation each");
  if (args.dtype != gemm_dtype::bf16) return refuse(why, "not bf16");
  if (args.trans_a) return refuse(why, "A is transposed");
  if (args.beta != 0.0f && !(args.c_f32 && args.beta == 1.0f))
    return refuse(why, "beta is not 0 (or 1 into an fp32 C)");
  std::vector<const gemm_group*> used;
  for (int g = 0; g < count; ++g)
    if (groups[g].m > 0) used.push_back(&groups[g]);
  row_views v;
  if (used.empty()) return v;
  const auto& first = *used.front();
  v.b_k_major = args.trans_b;
  v.c_f32 = args.c_f32;
  v.c_accumulate = args.beta == 1.0f;
  v.n = first.n;
  v.lda = first.lda;
  v.ldb = first.ldb;
  v.ldc = first.ldc;
  if (v.n < 1) return refuse(why, "n or k is 0");
  bool one_k = true;
  for (const auto* g : used) {
    if (g->n != v.n || g->lda != v.lda || g->ldb != v.ldb || g->ldc != v.ldc)
      return refuse(why, "the groups differ in n or a stride");
    if (g->k < 1) return refuse(why, "n or k is 0");
    one_k = one_k && g->k == first.k;
    v.k = std::max(v.k, g->k);
  }
  if (!one_k)
    for (const auto* g : used)
      if (g->k % kRowViewsStepK != 0)
        return refuse(why, "the groups differ in k and a k is not a multiple of 64");
  if (v.lda < v.k || v.ldb < (v.b_k_major ? v.k : v.n) || v.ldc < v.n)
    return refuse(why, "a stride is under the row it holds");
  if (args.b_view_rows < 0) return refuse(why, "b_view_rows is negative");
  if (v.lda % kStrideQuantum != 0 || v.ldb % kStrideQuantum != 0 || v.ldc % kStrideQuantum != 0)
    return refuse(why, "a stride is not a multiple of 8 elements");
  auto lowest = [&](auto member) {
    auto p = reinterpret_cast<std::uintptr_t>(used.front()->*member);
    for (const auto* g : used) p = std::min(p, reinterpret_cast<std::uintptr_t>(g->*member));
    return reinterpret_cast<void*>(p);
  };
  v.a = lowest(&gemm_group::a);
  v.b = lowest(&gemm_group::b);
  v.c = lowest(&gemm_group::c);
  if (!aligned16(v.a) || !aligned16(v.b) || !aligned16(v.c))
    return refuse(why, "a view does not start on a 16-byte boundary");
  bool mid_row = false;
  for (const auto* g : used) {
    const auto [a_row, a_col] = element_of(g->a, v.a, v.lda);
    const row_group r{
        a_row, row_of(g->b, v.b, v.ldb), row_of(g->c, v.c, v.ldc, v.c_f32 ? 4 : 2), g->m, a_col,
        g->k};
    if (r.a_row < 0 || r.b_row < 0 || r.c_row < 0)
      return refuse(why, "a group's matrix is not a whole number of rows from its view's start");
    if (r.a_col + r.k > v.lda) return refuse(why, "a group's A runs past the end of its row");
    mid_row = mid_row || r.a_col != 0;
    v.a_rows = std::max(v.a_rows, r.a_row + r.m);
    v.a_cols = std::max(v.a_cols, r.a_col + r.k);
    v.b_rows = std::max(v.b_rows, r.b_row + (v.b_k_major ? v.n : r.k));
    v.c_rows = std::max(v.c_rows, r.c_row + r.m);
    v.groups.push_back(r);
  }
  if (mid_row && v.k % kRowViewsStepK != 0)  // (differing ks are multiples of it already)
    return refuse(why,
                  "a group's A starts past a row's first column and k is not a multiple of 64");
  if (args.b_view_rows > 0) {
    for (const auto& r : v.groups)
      if (r.b_row >= args.b_view_rows) return refuse(why, "a group's B starts past b_view_rows");
    v.b_rows = args.b_view_rows;
  }
  if (v.a_rows > kMaxRows || v.a_cols > kMaxRows || v.b_rows > kMaxRows || v.c_rows > kMaxRows)
    return refuse(why, "a view has 2^31 rows or columns or more");
  return v;
}

}  // namespace muster::kernels

// What the sm90 grouped kernel (kernels/cuda/grouped_gemm_sm90.cu) computes from row_views, on
// the CPU and plainly: each group's tiles of 128 rows by `tile_n` columns, its k in steps of 64,
// every read through a view (past a view's rows or columns: zero, as its tensor maps give),
// sums in float, stores of the rows under m and the columns under n only (bf16, or fp32 written
// or added to). A spec of the views'
// meaning for the CPU tests, not the kernel's code.
#pragma once

#include <cstdint>
#include <vector>

#include "muster/kernels/bf16.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"

namespace muster::test {

inline void run_row_views(const kernels::row_views& v, std::int64_t tile_n = 128) {
  using kernels::bf16;
  constexpr std::int64_t kTileM = 128, kStepK = 64;
  const auto* a = static_cast<const bf16*>(v.a);
  const auto* b = static_cast<const bf16*>(v.b);
  auto* c = static_cast<bf16*>(v.c);
  auto* c_f32 = static_cast<float*>(v.c);
  // an element of a view, zero past its rows or columns
  const auto a_at = [&](std::int64_t r, std::int64_t col) {
    return r < v.a_rows && col < v.a_cols ? kernels::to_float(a[r * v.lda + col]) : 0.0f;
  };
  const auto b_cols = v.b_k_major ? v.k : v.n;
  const auto b_at = [&](std::int64_t r, std::int64_t col) {
    return r < v.b_rows && col < b_cols ? kernels::to_float(b[r * v.ldb + col]) : 0.0f;
  };
  for (const auto& g : v.groups) {
    const auto k_steps = (g.k + kStepK - 1) / kStepK;  // the group's own reduction
    for (std::int64_t m0 = 0; m0 < g.m; m0 += kTileM)
      for (std::int64_t n0 = 0; n0 < v.n; n0 += tile_n) {
        std::vector<float> acc(std::size_t(kTileM * tile_n), 0.0f);
        for (std::int64_t i = 0; i < kTileM; ++i)
          for (std::int64_t j = 0; j < tile_n; ++j) {
            float sum = 0.0f;
            for (std::int64_t p = 0; p < k_steps * kStepK; ++p) {
              const float x = a_at(g.a_row + m0 + i, g.a_col + p);
              const float w = v.b_k_major ? b_at(g.b_row + n0 + j, p) : b_at(g.b_row + p, n0 + j);
              sum += x * w;
            }
            acc[std::size_t(i * tile_n + j)] = sum;
          }
        for (std::int64_t i = 0; i < kTileM && m0 + i < g.m; ++i)
          for (std::int64_t j = 0; j < tile_n && n0 + j < v.n; ++j) {
            const auto at = (g.c_row + m0 + i) * v.ldc + n0 + j;
            const float sum = acc[std::size_t(i * tile_n + j)];
            if (!v.c_f32)
              c[at] = kernels::to_bf16(sum);
            else
              c_f32[at] = v.c_accumulate ? c_f32[at] + sum : sum;
          }
      }
  }
}

}  // namespace muster::test

// Grouped GEMM test cases shared by the CPU and CUDA tests: groups of random matrices with their
// own m, n, k (empty ones among them), stored with row strides wider than their rows, and the
// product computed plainly in double.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"
#include "tests/kernels/normal_draws.hpp"

namespace muster::test {

struct gemm_case_group {
  std::int64_t m, n, k;
  std::vector<float> a, b, c;  // as stored, C's starting contents
  std::int64_t lda, ldb, ldc;
};

// op(A) (m, k) with A stored (m, k) or (k, m); the strides are the row plus `pad`.
inline std::vector<gemm_case_group> gemm_case(const std::vector<std::int64_t>& ms, std::int64_t n,
                                              std::int64_t k, bool trans_a, bool trans_b,
                                              std::int64_t pad, std::uint32_t seed) {
  std::vector<gemm_case_group> out;
  for (const auto m : ms) {
    gemm_case_group g{m,      n, k, {}, {}, {}, (trans_a ? m : k) + pad, (trans_b ? k : n) + pad,
                      n + pad};
    g.a = normal_draws(std::size_t((trans_a ? k : m) * g.lda), seed++);
    g.b = normal_draws(std::size_t((trans_b ? n : k) * g.ldb), seed++);
    g.c = normal_draws(std::size_t(m * g.ldc), seed++);
    out.push_back(std::move(g));
  }
  return out;
}

// C = op(A) op(B) + beta C in double, C's padding left as it was.
inline std::vector<double> gemm_reference(const gemm_case_group& g, bool trans_a, bool trans_b,
                                          float beta) {
  std::vector<double> c(g.c.begin(), g.c.end());
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < g.k; ++p) {
        const double a =
            trans_a ? g.a[std::size_t(p * g.lda + i)] : g.a[std::size_t(i * g.lda + p)];
        const double b =
            trans_b ? g.b[std::size_t(j * g.ldb + p)] : g.b[std::size_t(p * g.ldb + j)];
        sum += a * b;
      }
      auto& out = c[std::size_t(i * g.ldc + j)];
      out = sum + (beta == 0.0f ? 0.0 : double(beta) * out);
    }
  return c;
}

}  // namespace muster::test

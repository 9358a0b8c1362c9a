// gemm() (oneDNN or BLAS, whichever the build took) against the product written out in fp64,
// for every combination of transposes, odd sizes, row strides wider than the rows, and beta.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "muster/kernels/gemm.hpp"

using namespace muster::kernels;

TEST_CASE("gemm computes alpha * op(A) op(B) + beta * C for every transpose", "[kernels]") {
  const std::int64_t m = 7, n = 5, k = 11, pad = 3;  // row strides `pad` wider than needed
  std::mt19937 gen(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      // A stored as (m, k) or, transposed, (k, m); B as (k, n) or (n, k)
      const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + pad;
      const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_cols + pad;
      const std::int64_t ldc = n + pad;
      std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(m * ldc);
      for (auto* v : {&a, &b, &c})
        for (auto& x : *v) x = dist(gen);
      const auto before = c;
      const float alpha = 0.5f, beta = 2.0f;
      cpu::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      INFO("trans_a " << ta << " trans_b " << tb << " on " << cpu::gemm_library());
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (std::int64_t p = 0; p < k; ++p)
            sum += double(ta ? a[p * lda + i] : a[i * lda + p]) *
                   (tb ? b[j * ldb + p] : b[p * ldb + j]);
          REQUIRE(c[i * ldc + j] == Approx(alpha * sum + beta * before[i * ldc + j]).margin(1e-5));
        }
      // the padding between rows is left alone
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = n; j < ldc; ++j) REQUIRE(c[i * ldc + j] == before[i * ldc + j]);
    }
}

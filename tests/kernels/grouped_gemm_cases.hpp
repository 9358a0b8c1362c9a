// Grouped GEMM test cases shared by the CPU and CUDA tests: groups of random matrices with their
// own m, n, k (empty ones among them), stored with row strides wider than their rows, and the
// product computed plainly in double; and groups laid out as the experts' are (expert_layout),
// for the split into uniform batches.
#pragma once

#include <cstdint>
#include <limits>
#include <numeric>
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

constexpr std::int64_t kExpertPad = 3;  // every stride of expert_layout is its row plus this

// Groups sharing storage as the experts' do. m varying: op(A) and C are row blocks of one tall
// matrix each (A stored transposed: column blocks), B one matrix a group. k varying: op(A)'s
// columns and op(B)'s rows are blocks of one matrix each, C one a group.
struct expert_layout {
  std::vector<float> a, b, c;
  std::vector<kernels::gemm_group> groups;

  expert_layout(const std::vector<std::int64_t>& sizes, bool along_k, std::int64_t m,
                std::int64_t n, std::int64_t k, const kernels::grouped_gemm_args& args,
                std::uint32_t seed) {
    const auto total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t(0));
    const auto count = static_cast<std::int64_t>(sizes.size());
    std::int64_t lda, ldb, ldc, a_rows, b_rows, c_rows;
    if (!along_k) {  // sizes are the groups' m
      lda = (args.trans_a ? total : k) + kExpertPad;
      a_rows = args.trans_a ? k : total;
      ldb = (args.trans_b ? k : n) + kExpertPad;
      b_rows = (args.trans_b ? n : k) * count;
      ldc = n + kExpertPad;
      c_rows = total;
    } else {  // sizes are the groups' k
      lda = (args.trans_a ? m : total) + kExpertPad;
      a_rows = args.trans_a ? total : m;
      ldb = (args.trans_b ? total : n) + kExpertPad;
      b_rows = args.trans_b ? n : total;
      ldc = n + kExpertPad;
      c_rows = m * count;
    }
    a = normal_draws(std::size_t(a_rows * lda), seed);
    b = normal_draws(std::size_t(b_rows * ldb), seed + 1);
    c = args.beta == 0.0f
            ? std::vector<float>(std::size_t(c_rows * ldc), std::numeric_limits<float>::quiet_NaN())
            : normal_draws(std::size_t(c_rows * ldc), seed + 2);
    std::int64_t at = 0;
    for (std::int64_t g = 0; g < count; ++g) {
      const auto s = sizes[std::size_t(g)];
      kernels::gemm_group x{along_k ? m : s, n,   along_k ? s : k, nullptr, lda,
                            nullptr,         ldb, nullptr,         ldc};
      if (!along_k) {
        x.a = a.data() + (args.trans_a ? at : at * lda);
        x.b = b.data() + g * (args.trans_b ? n : k) * ldb;
        x.c = c.data() + at * ldc;
      } else {
        x.a = a.data() + (args.trans_a ? at * lda : at);
        x.b = b.data() + (args.trans_b ? at : at * ldb);
        x.c = c.data() + g * m * ldc;
      }
      groups.push_back(x);
      at += s;
    }
  }
};

// Every group's C in double: op(A) op(B) + beta C.
inline std::vector<std::vector<double>> plain_products(const expert_layout& l,
                                                       const kernels::grouped_gemm_args& args) {
  std::vector<std::vector<double>> out;
  for (const auto& g : l.groups) {
    const auto* a = static_cast<const float*>(g.a);
    const auto* b = static_cast<const float*>(g.b);
    const auto* c = static_cast<const float*>(g.c);
    std::vector<double> r(std::size_t(g.m * g.n));
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        double sum = args.beta == 0.0f ? 0.0 : double(args.beta) * c[i * g.ldc + j];
        for (std::int64_t p = 0; p < g.k; ++p)
          sum += double(args.trans_a ? a[p * g.lda + i] : a[i * g.lda + p]) *
                 double(args.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j]);
        r[std::size_t(i * g.n + j)] = sum;
      }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace muster::test

// as_row_views: the experts' forward seen as one view of each matrix with the rows each group
// starts at, and every way a grouped product can fail to have that form.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "muster/kernels/grouped_gemm_rows.hpp"
#include "tests/kernels/row_views_reference.hpp"

using namespace muster::kernels;

namespace {

// The experts' forward over bf16 storage: x (rows, k) at stride lda, the weights (E, n, k) at
// ldb, y (rows, n) at ldc; group e takes counts[e] rows of x and y from where e - 1 ended.
struct forward_layout {
  std::vector<std::uint16_t> x, w, y;
  std::vector<gemm_group> groups;
  grouped_gemm_args args;
  forward_layout(const std::vector<std::int64_t>& counts, std::int64_t n, std::int64_t k,
                 std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
    std::int64_t rows = 0;
    for (auto c : counts) rows += c;
    // +8: room to move a pointer off its row in the refusal cases
    x.resize(std::size_t(rows * lda + 8));
    w.resize(std::size_t(std::int64_t(counts.size()) * n * ldb + 8));
    y.resize(std::size_t(rows * ldc + 8));
    std::int64_t r = 0;
    for (std::size_t e = 0; e < counts.size(); ++e) {
      groups.push_back({counts[e], n, k, x.data() + r * lda, lda,
                        w.data() + std::int64_t(e) * n * ldb, ldb, y.data() + r * ldc, ldc});
      r += counts[e];
    }
    args.trans_b = true;
    args.dtype = gemm_dtype::bf16;
    args.same_storage = true;
  }
  std::optional<row_views> views(std::string* why = nullptr) const {
    return as_row_views(groups.data(), int(groups.size()), args, why);
  }
};

const char* at(const void* base, std::int64_t row, std::int64_t ld) {
  return static_cast<const char*>(base) + row * ld * 2;
}

bool on_16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

TEST_CASE("as_row_views finds each expert's rows in one view of x, the weights and y",
          "[kernels][grouped_gemm]") {
  const std::vector<std::int64_t> counts{5, 0, 129, 1, 0, 64};
  forward_layout f(counts, 24, 40, 48, 40, 32);
  REQUIRE(on_16(f.x.data()));  // std::vector's allocation: operator new's 16 bytes
  std::string why;
  const auto v = f.views(&why);
  INFO(why);
  REQUIRE(v.has_value());
  CHECK(v->n == 24);
  CHECK(v->k == 40);
  CHECK(v->lda == 48);
  CHECK(v->ldb == 40);
  CHECK(v->ldc == 32);
  CHECK(v->a == f.x.data());
  CHECK(v->b == f.w.data());
  CHECK(v->c == f.y.data());
  // the empty experts are left out; the others' rows and B rows as laid out
  REQUIRE(v->groups.size() == 4);
  const std::vector<std::int64_t> rows{0, 5, 134, 135}, experts{0, 2, 3, 5}, ms{5, 129, 1, 64};
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("group " << i);
    const auto& r = v->groups[i];
    CHECK(r.a_row == rows[i]);
    CHECK(r.c_row == rows[i]);
    CHECK(r.b_row == experts[i] * 24);
    CHECK(r.m == ms[i]);
    // every group's matrices are where its rows say, in its view
    const auto& g = f.groups[std::size_t(experts[i])];
    CHECK(at(v->a, r.a_row, v->lda) == g.a);
    CHECK(at(v->b, r.b_row, v->ldb) == g.b);
    CHECK(at(v->c, r.c_row, v->ldc) == g.c);
  }
  CHECK(v->a_rows == 199);
  CHECK(v->c_rows == 199);
  CHECK(v->b_rows == 6 * 24);
}

TEST_CASE("as_row_views takes the lowest address of each matrix as its view's start",
          "[kernels][grouped_gemm]") {
  forward_layout f({16, 32, 8}, 8, 8, 8, 8, 8);
  std::swap(f.groups[0], f.groups[2]);  // groups in another order than their rows
  const auto v = f.views();
  REQUIRE(v.has_value());
  CHECK(v->a == f.x.data());
  CHECK(v->groups[0].a_row == 48);
  CHECK(v->groups[0].b_row == 16);
  CHECK(v->groups[2].a_row == 0);
  CHECK(v->a_rows == 56);
}

TEST_CASE("as_row_views has no groups where every group is empty", "[kernels][grouped_gemm]") {
  forward_layout f({0, 0}, 8, 8, 8, 8, 8);
  const auto v = f.views();
  REQUIRE(v.has_value());
  CHECK(v->groups.empty());
}

TEST_CASE("as_row_views refuses groups without the row-grouped form and says why",
          "[kernels][grouped_gemm]") {
  using change = std::function<void(forward_layout&)>;
  const std::vector<std::pair<change, std::string>> cases{
      {[](forward_layout& f) { f.args.same_storage = false; },
       "not said to be in one allocation each"},
      {[](forward_layout& f) { f.args.dtype = gemm_dtype::f32; }, "not bf16"},
      {[](forward_layout& f) { f.args.trans_a = true; }, "A is transposed"},
      {[](forward_layout& f) { f.args.beta = 1.0f; }, "beta is not 0 (or 1 into an fp32 C)"},
      {[](forward_layout& f) { f.groups[1].n = 16; }, "the groups differ in n or a stride"},
      {[](forward_layout& f) { f.groups[2].k = 8; },
       "the groups differ in k and a k is not a multiple of 64"},
      {[](forward_layout& f) { f.groups[0].ldc = 40; }, "the groups differ in n or a stride"},
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.k = 0;
       },
       "n or k is 0"},
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.lda = 36;
       },
       "a stride is not a multiple of 8 elements"},
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.ldc = 16;
       },
       "a stride is under the row it holds"},
      {[](forward_layout& f) { f.args.b_view_rows = -1; }, "b_view_rows is negative"},
      {[](forward_layout& f) { f.args.b_view_rows = 24; },  // the second expert's from 24
       "a group's B starts past b_view_rows"},
      // x's view starts one element in: 2 bytes off 16
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.a = static_cast<const std::uint16_t*>(g.a) + 1;
       },
       "a view does not start on a 16-byte boundary"},
      // the second expert's weight half a row from the first's
      {[](forward_layout& f) { f.groups[1].b = f.w.data() + 8; },
       "a group's matrix is not a whole number of rows from its view's start"},
      {[](forward_layout& f) { f.groups[2].c = f.y.data() + 8; },
       "a group's matrix is not a whole number of rows from its view's start"},
  };
  for (const auto& [apply, reason] : cases) {
    forward_layout f({16, 32, 8}, 24, 32, 32, 32, 24);
    REQUIRE(f.views().has_value());
    apply(f);
    std::string why;
    INFO("expected: " << reason);
    CHECK_FALSE(f.views(&why).has_value());
    CHECK(why == reason);
  }
}

TEST_CASE("as_row_views takes the dgrad's B as k rows a group, n wide", "[kernels][grouped_gemm]") {
  // dx_e (m_e, 40) = dy_e (m_e, 24) W_e (24, 40): W stacked (E, 24, 40) at stride 48
  const std::vector<std::int64_t> counts{7, 0, 16};
  const std::int64_t k = 24, n = 40, lda = 32, ldb = 48, ldc = 48;
  std::vector<std::uint16_t> dy(std::size_t(23 * lda)), w(std::size_t(3 * k * ldb)),
      dx(std::size_t(23 * ldc));
  std::vector<gemm_group> groups;
  std::int64_t r = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    groups.push_back({counts[e], n, k, dy.data() + r * lda, lda,
                      w.data() + std::int64_t(e) * k * ldb, ldb, dx.data() + r * ldc, ldc});
    r += counts[e];
  }
  grouped_gemm_args args;
  args.dtype = gemm_dtype::bf16;
  args.same_storage = true;
  std::string why;
  const auto v = as_row_views(groups.data(), int(groups.size()), args, &why);
  INFO(why);
  REQUIRE(v.has_value());
  CHECK_FALSE(v->b_k_major);
  REQUIRE(v->groups.size() == 2);
  CHECK(v->groups[1].b_row == 2 * k);  // the third expert's k rows of W
  CHECK(v->groups[1].a_row == 7);
  CHECK(v->b_rows == 3 * k);  // k rows a group, not n
  CHECK(v->a_rows == 23);
}

TEST_CASE("as_row_views takes the wgrad's blocks of dy^T columns and x's rows past its end",
          "[kernels][grouped_gemm]") {
  // dW_e (16, 24) = dyT_e (16, 64) x_e (64, 24): dy^T (16, 3 x 64), expert e's columns from
  // 64 e; x (100, 24), expert e's 64 rows from its first (the last ones reach past x's end)
  const std::int64_t out = 16, in = 24, common = 64, padded = 3 * common;
  const std::vector<std::int64_t> counts{40, 0, 60}, first{0, 64, 64}, start{0, 40, 40};
  std::vector<std::uint16_t> dy_t(std::size_t(out * padded)), x(std::size_t(100 * in)),
      dw(std::size_t(3 * out * in));
  std::vector<gemm_group> groups;
  for (std::size_t e = 0; e < counts.size(); ++e)
    if (counts[e] > 0)
      groups.push_back({out, in, common, dy_t.data() + first[e], padded, x.data() + start[e] * in,
                        in, dw.data() + std::int64_t(e) * out * in, in});
  grouped_gemm_args args;
  args.dtype = gemm_dtype::bf16;
  args.same_storage = true;
  std::string why;
  auto v = as_row_views(groups.data(), int(groups.size()), args, &why);
  INFO(why);
  REQUIRE(v.has_value());
  REQUIRE(v->groups.size() == 2);
  CHECK(v->groups[0].a_col == 0);
  CHECK(v->groups[1].a_col == 64);
  CHECK(v->groups[1].a_row == 0);
  CHECK(v->groups[1].b_row == 40);
  CHECK(v->groups[1].c_row == 2 * out);
  CHECK(v->groups[1].m == out);
  CHECK(v->a_rows == out);
  CHECK(v->a_cols == 128);  // the last group's columns end there
  CHECK(v->b_rows == 104);  // as far as the groups reach: past x's 100 rows
  args.b_view_rows = 100;   // x's rows: the last group's 4 past them read as zeros
  v = as_row_views(groups.data(), int(groups.size()), args, &why);
  REQUIRE(v.has_value());
  CHECK(v->b_rows == 100);

  // a group starting mid-row whose k does not end on the kernel's step
  for (auto& g : groups) g.k = 56;
  CHECK_FALSE(as_row_views(groups.data(), int(groups.size()), args, &why).has_value());
  CHECK(why == "a group's A starts past a row's first column and k is not a multiple of 64");
  // each its own k (reductions padded by expert), multiples of the step: each group keeps its
  // own, the views' k is the largest
  groups[0].k = 64;
  groups[1].k = 128;
  v = as_row_views(groups.data(), int(groups.size()), args, &why);
  INFO(why);
  REQUIRE(v.has_value());
  CHECK(v->k == 128);
  CHECK(v->groups[0].k == 64);
  CHECK(v->groups[1].k == 128);
  CHECK(v->a_cols == 192);  // the last group's 128 columns from 64
  groups[1].k = 72;         // one off the step
  CHECK_FALSE(as_row_views(groups.data(), int(groups.size()), args, &why).has_value());
  CHECK(why == "the groups differ in k and a k is not a multiple of 64");
  // and one whose columns run past its row
  for (auto& g : groups) g.k = 64;
  groups[1].a = dy_t.data() + 160;
  CHECK_FALSE(as_row_views(groups.data(), int(groups.size()), args, &why).has_value());
  CHECK(why == "a group's A runs past the end of its row");
}

TEST_CASE("b_view_rows is the GPU's sm90 kernel's alone", "[kernels][grouped_gemm]") {
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f);
  const gemm_group g{2, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2};
  grouped_gemm_args args;
  args.b_view_rows = 2;
  CHECK_THROWS_WITH(cpu::grouped_gemm(&g, 1, args), Catch::Contains("sm90 kernel's alone"));
}

namespace {

// Random bf16 values as stored, and the floats they stand for.
struct bf16_matrix {
  std::vector<muster::kernels::bf16> bits;
  std::vector<float> values;
  bf16_matrix(std::size_t n, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist;
    for (std::size_t i = 0; i < n; ++i) {
      bits.push_back(muster::kernels::to_bf16(dist(gen)));
      values.push_back(muster::kernels::to_float(bits.back()));
    }
  }
};

// max |got - want| / max |want| over C's rows of each group
double worst_error(const std::vector<muster::kernels::bf16>& c, const std::vector<double>& want) {
  double scale = 1e-30, worst = 0;
  for (auto w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(muster::kernels::to_float(c[i])) - want[i]) / scale);
  return worst;
}

}  // namespace

TEST_CASE("the views give the experts' forward, dgrad and wgrad products, tile by tile",
          "[kernels][grouped_gemm]") {
  using muster::kernels::bf16;
  const std::vector<std::int64_t> counts{1, 127, 0, 129, 5};
  std::int64_t total = 0;
  for (auto c : counts) total += c;
  const auto experts = std::int64_t(counts.size());
  for (const bool dgrad : {false, true})
    for (const std::int64_t tile_n : {128, 256}) {
      INFO((dgrad ? "dgrad" : "forward") << " tile_n " << tile_n);
      // y (total, n) = x (total, k) op(W_e): W (E, n, k) for the forward, (E, k, n) the dgrad
      const std::int64_t n = 72, k = 40, lda = 48, ldb = dgrad ? 80 : 40, ldc = 80;
      const auto w_rows = dgrad ? k : n;
      bf16_matrix x(std::size_t(total * lda), 1), w(std::size_t(experts * w_rows * ldb), 2);
      std::vector<bf16> y(std::size_t(total * ldc), bf16{0x7fc1});
      std::vector<gemm_group> groups;
      std::vector<double> want(y.size());
      for (std::size_t i = 0; i < y.size(); ++i) want[i] = muster::kernels::to_float(y[i]);
      std::int64_t r = 0;
      for (std::int64_t e = 0; e < experts; ++e) {
        groups.push_back({counts[std::size_t(e)], n, k, x.bits.data() + r * lda, lda,
                          w.bits.data() + e * w_rows * ldb, ldb, y.data() + r * ldc, ldc});
        for (std::int64_t i = r; i < r + counts[std::size_t(e)]; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (std::int64_t p = 0; p < k; ++p)
              sum +=
                  double(x.values[std::size_t(i * lda + p)]) *
                  double(
                      w.values[std::size_t(dgrad ? (e * k + p) * ldb + j : (e * n + j) * ldb + p)]);
            want[std::size_t(i * ldc + j)] = sum;
          }
        r += counts[std::size_t(e)];
      }
      grouped_gemm_args args;
      args.trans_b = !dgrad;
      args.dtype = gemm_dtype::bf16;
      args.same_storage = true;
      const auto v = as_row_views(groups.data(), int(groups.size()), args);
      REQUIRE(v.has_value());
      muster::test::run_row_views(*v, tile_n);
      // the padding columns keep their NaN in both: compare the products' columns only
      std::vector<bf16> got;
      std::vector<double> products;
      for (std::int64_t i = 0; i < total; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          got.push_back(y[std::size_t(i * ldc + j)]);
          products.push_back(want[std::size_t(i * ldc + j)]);
        }
      CHECK(worst_error(got, products) <= 8e-3);
      for (std::int64_t i = 0; i < total; ++i)
        for (std::int64_t j = n; j < ldc; ++j) CHECK(y[std::size_t(i * ldc + j)].bits == 0x7fc1);
    }
}

TEST_CASE("the views give the wgrad over the padded dy^T with x's rows past its end as zeros",
          "[kernels][grouped_gemm]") {
  using muster::kernels::bf16;
  // dW_e (24, 40) = dyT_e (24, k_e) x_e (k_e, 40), the experts' columns of dy^T one after the
  // other, each its reduction wide, zeros past its rows; the last expert's k_e rows of x run
  // past x's 177. The reduction: one common for every expert, or each expert's rows rounded up
  // to 64 (the groups' k differ: each runs its own steps, none reading past its k)
  const std::vector<std::int64_t> counts{40, 0, 130, 7};
  const std::int64_t out = 24, in = 40, total = 177;
  for (const bool common : {true, false}) {
    INFO((common ? "one common reduction of 192" : "each expert's reduction padded to 64"));
    std::vector<std::int64_t> k;
    for (const auto m : counts) k.push_back(common ? 192 : (m + 63) / 64 * 64);
    std::int64_t padded = 0;
    for (std::size_t e = 0; e < counts.size(); ++e) padded += counts[e] > 0 ? k[e] : 0;
    bf16_matrix dy(std::size_t(total * out), 3), x(std::size_t(total * in), 4);
    std::vector<bf16> dy_t(std::size_t(out * padded), bf16{0});
    std::vector<bf16> dw(std::size_t(4 * out * in), bf16{0x7fc1});
    std::vector<double> want(dw.size(), 0.0);
    std::vector<gemm_group> groups;
    std::int64_t r = 0, col = 0;
    for (std::size_t e = 0; e < counts.size(); ++e) {
      const auto m = counts[e];
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t f = 0; f < out; ++f)
          dy_t[std::size_t(f * padded + col + i)] = dy.bits[std::size_t((r + i) * out + f)];
      for (std::int64_t f = 0; f < out; ++f)
        for (std::int64_t h = 0; h < in; ++h) {
          double sum = 0;
          for (std::int64_t i = 0; i < m; ++i)
            sum += double(dy.values[std::size_t((r + i) * out + f)]) *
                   double(x.values[std::size_t((r + i) * in + h)]);
          want[e * std::size_t(out * in) + std::size_t(f * in + h)] = sum;
        }
      if (m > 0)
        groups.push_back({out, in, k[e], dy_t.data() + col, padded, x.bits.data() + r * in, in,
                          dw.data() + std::int64_t(e) * out * in, in});
      r += m;
      col += m > 0 ? k[e] : 0;
    }
    grouped_gemm_args args;
    args.dtype = gemm_dtype::bf16;
    args.same_storage = true;
    args.b_view_rows = total;  // x ends there: the views read zeros past it, not past the buffer
    std::string why;
    const auto v = as_row_views(groups.data(), int(groups.size()), args, &why);
    INFO(why);
    REQUIRE(v.has_value());
    CHECK(v->k == 192);
    CHECK(v->groups[1].k == 192);
    CHECK(v->groups[2].k == (common ? 192 : 64));
    muster::test::run_row_views(*v, 128);
    for (std::size_t e = 0; e < counts.size(); ++e) {
      INFO("expert " << e);
      const auto at = e * std::size_t(out * in);
      if (counts[e] == 0) {  // no group: as it was
        for (std::size_t i = 0; i < std::size_t(out * in); ++i) CHECK(dw[at + i].bits == 0x7fc1);
        continue;
      }
      const std::vector<bf16> got(dw.begin() + std::ptrdiff_t(at),
                                  dw.begin() + std::ptrdiff_t(at) + out * in);
      const std::vector<double> products(want.begin() + std::ptrdiff_t(at),
                                         want.begin() + std::ptrdiff_t(at) + out * in);
      CHECK(worst_error(got, products) <= 8e-3);
    }
  }
}

TEST_CASE("the views add the wgrad into fp32 gradients with c_f32 and beta 1",
          "[kernels][grouped_gemm]") {
  using muster::kernels::bf16;
  // dW_e (16, 24) += dyT_e (16, 64) x_e (64, 24) into fp32 gradients holding an earlier sum
  const std::vector<std::int64_t> counts{50, 64};
  const std::int64_t out = 16, in = 24, common = 64, total = 114, padded = 2 * common;
  bf16_matrix dy_t(std::size_t(out * padded), 5), x(std::size_t(total * in), 6);
  for (std::int64_t f = 0; f < out; ++f)  // the first expert's padding columns are zeros
    for (std::int64_t i = counts[0]; i < common; ++i) {
      dy_t.bits[std::size_t(f * padded + i)] = bf16{0};
      dy_t.values[std::size_t(f * padded + i)] = 0.0f;
    }
  std::vector<float> grads(std::size_t(2 * out * in));
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * float(i % 7);
  const auto earlier = grads;
  std::vector<gemm_group> groups;
  for (std::int64_t e = 0; e < 2; ++e)
    groups.push_back({out, in, common, dy_t.bits.data() + e * common, padded,
                      x.bits.data() + e * counts[0] * in, in, grads.data() + e * out * in, in});
  grouped_gemm_args args;
  args.dtype = gemm_dtype::bf16;
  args.c_f32 = true;
  args.beta = 1.0f;
  args.same_storage = true;
  std::string why;
  auto v = as_row_views(groups.data(), 2, args, &why);
  INFO(why);
  REQUIRE(v.has_value());
  CHECK(v->c_f32);
  CHECK(v->c_accumulate);
  CHECK(v->groups[1].c_row == out);  // fp32 rows: 4 bytes an element
  muster::test::run_row_views(*v, 128);
  double worst = 0, scale = 1e-30;
  for (std::int64_t e = 0; e < 2; ++e)
    for (std::int64_t f = 0; f < out; ++f)
      for (std::int64_t h = 0; h < in; ++h) {
        double sum = 0;
        for (std::int64_t i = 0; i < counts[std::size_t(e)]; ++i)
          sum += double(dy_t.values[std::size_t(f * padded + e * common + i)]) *
                 double(x.values[std::size_t((e * counts[0] + i) * in + h)]);
        const auto at = std::size_t((e * out + f) * in + h);
        scale = std::max(scale, std::abs(sum));
        worst = std::max(worst, std::abs(double(grads[at]) - (double(earlier[at]) + sum)));
      }
  CHECK(worst / scale <= 1e-5);  // fp32 sums, no bf16 rounding between

  args.beta = 0.5f;  // only 0 or 1
  CHECK_FALSE(as_row_views(groups.data(), 2, args, &why).has_value());
  CHECK(why == "beta is not 0 (or 1 into an fp32 C)");
  args.c_f32 = false;
  args.beta = 1.0f;  // a bf16 C takes no beta
  CHECK_FALSE(as_row_views(groups.data(), 2, args, &why).has_value());
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f);
  const gemm_group g{2, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2};
  grouped_gemm_args fp32;
  fp32.c_f32 = true;
  CHECK_THROWS_WITH(cpu::grouped_gemm(&g, 1, fp32), Catch::Contains("sm90"));
}

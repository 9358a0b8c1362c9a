// as_row_views: the experts' forward seen as one view of each matrix with the rows each group
// starts at, and every way a grouped product can fail to have that form.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "muster/kernels/grouped_gemm_rows.hpp"

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
      {[](forward_layout& f) { f.args.beta = 1.0f; }, "beta is not 0"},
      {[](forward_layout& f) { f.groups[1].n = 16; }, "the groups differ in n, k or a stride"},
      {[](forward_layout& f) { f.groups[2].k = 8; }, "the groups differ in n, k or a stride"},
      {[](forward_layout& f) { f.groups[0].ldc = 40; }, "the groups differ in n, k or a stride"},
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.k = 0;
       },
       "n or k is 0"},
      {[](forward_layout& f) {
         for (auto& g : f.groups) g.lda = 36;
       },
       "a stride is not a multiple of 8 elements"},
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

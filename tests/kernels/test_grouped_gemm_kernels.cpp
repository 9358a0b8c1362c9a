// The grouped GEMM on the CPU against products computed plainly in double: every transpose
// combination, groups of 0 to 300 rows (an expert given no tokens), k = 0 (the wgrad of such an
// expert), strides wider than the rows, beta 0 over NaN and beta 1 accumulating; and the
// argument check's messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"
#include "tests/kernels/grouped_gemm_cases.hpp"

using namespace muster::kernels;

namespace {

std::vector<gemm_group> as_groups(std::vector<muster::test::gemm_case_group>& cases) {
  std::vector<gemm_group> out;
  for (auto& c : cases)
    out.push_back({c.m, c.n, c.k, c.a.data(), c.lda, c.b.data(), c.ldb, c.c.data(), c.ldc});
  return out;
}

}  // namespace

TEST_CASE("the grouped GEMM on the CPU matches plain products", "[kernels][grouped_gemm]") {
  std::uint32_t seed = 61;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true})
      for (const float beta : {0.0f, 1.0f})
        for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                 {1, 1}, {7, 5}, {64, 48}, {33, 0}}) {
          INFO("trans_a " << trans_a << " trans_b " << trans_b << " beta " << beta << " n " << n
                          << " k " << k);
          auto cases =
              muster::test::gemm_case({0, 1, 13, 300, 2}, n, k, trans_a, trans_b, 3, seed++);
          std::vector<std::vector<double>> want;
          for (auto& c : cases) {
            if (beta == 0.0f)  // beta 0 must not read C
              for (auto& v : c.c) v = std::nanf("");
            want.push_back(muster::test::gemm_reference(c, trans_a, trans_b, beta));
          }
          auto groups = as_groups(cases);
          grouped_gemm_args args;
          args.trans_a = trans_a;
          args.trans_b = trans_b;
          args.beta = beta;
          cpu::grouped_gemm(groups.data(), int(groups.size()), args);
          for (std::size_t g = 0; g < cases.size(); ++g)
            for (std::int64_t i = 0; i < cases[g].m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                const auto at = std::size_t(i * cases[g].ldc + j);
                INFO("group " << g << " row " << i << " col " << j);
                REQUIRE(cases[g].c[at] ==
                        Approx(want[g][at]).margin(1e-4 * (1 + double(k))).epsilon(1e-4));
              }
        }
}

TEST_CASE("the grouped GEMM's argument check names the group and the size",
          "[kernels][grouped_gemm]") {
  float a[4] = {}, b[4] = {}, c[4] = {};
  grouped_gemm_args args;
  std::vector<gemm_group> groups{{2, 2, 2, a, 2, b, 2, c, 2}, {2, 2, 2, a, 1, b, 2, c, 2}};
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: group 1: lda 1 is under its row of 2");
  groups[1] = {-1, 2, 2, a, 2, b, 2, c, 2};
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: group 1: negative size m=-1 n=2 k=2");
  groups[1] = {2, 2, 2, a, 2, nullptr, 2, c, 2};
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: group 1: b is null");
  groups[1] = {0, 2, 2, nullptr, 0, nullptr, 0, nullptr, 0};  // empty: nothing is read
  REQUIRE_NOTHROW(cpu::grouped_gemm(groups.data(), 2, args));
  args.split_quantum = 0;
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: split_levels 3 and split_quantum 0 must be 1 or more");
  args.split_quantum = 64;
  args.sm90_tile_n = 192;
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: sm90_tile_n 192: use 0 (by n), 128 or 256");
  args.sm90_tile_n = 256;
  REQUIRE_NOTHROW(cpu::grouped_gemm(groups.data(), 2, args));
  args.dtype = gemm_dtype::bf16;
  REQUIRE_THROWS_WITH(cpu::grouped_gemm(groups.data(), 2, args),
                      "grouped gemm: the CPU takes fp32 only");
}

TEST_CASE("pointers_aligned looks at every matrix a group reads or writes",
          "[kernels][grouped_gemm]") {
  alignas(16) float a[8] = {}, b[8] = {}, c[8] = {};
  std::vector<gemm_group> groups{{2, 2, 2, a, 2, b, 2, c, 2}, {2, 2, 2, a + 4, 2, b, 2, c + 4, 2}};
  REQUIRE(pointers_aligned(groups.data(), 2));
  for (int which = 0; which < 3; ++which) {  // one float (4 bytes) off, in a, b or c
    auto off = groups;
    if (which == 0) off[1].a = a + 1;
    if (which == 1) off[1].b = b + 1;
    if (which == 2) off[1].c = c + 1;
    INFO("off in "
         << "abc"[which]);
    REQUIRE_FALSE(pointers_aligned(off.data(), 2));
  }
  groups[1] = {0, 2, 2, a + 1, 2, b + 1, 2, c + 1, 2};  // no rows: nothing read or written
  REQUIRE(pointers_aligned(groups.data(), 2));
  groups[1] = {2, 2, 0, a + 1, 2, b + 1, 2, c, 2};  // k zero: C only
  REQUIRE(pointers_aligned(groups.data(), 2));
  groups[1].c = c + 2;  // 8 bytes in
  REQUIRE_FALSE(pointers_aligned(groups.data(), 2));
}

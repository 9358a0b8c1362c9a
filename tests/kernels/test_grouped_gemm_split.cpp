// The grouped product split into uniform batches and a rest (muster/kernels/grouped_gemm_split):
// which batches it makes, and that running them and then the rest through the CPU grouped GEMM
// gives the products computed plainly in double, for groups laid out as the experts' are (rows
// of one tall matrix, one weight each), every transpose, beta 0 (C starting as NaN) and 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"
#include "muster/kernels/grouped_gemm_split.hpp"
#include "tests/kernels/grouped_gemm_cases.hpp"

using namespace muster::kernels;
using muster::test::expert_layout;

namespace {

// The split run on the CPU: each batch as groups of its one shape, then the rest.
void run_split(const gemm_split& s, grouped_gemm_args args) {
  for (const auto& b : s.batches) {
    std::vector<gemm_group> members;
    for (std::size_t i = 0; i < b.a.size(); ++i)
      members.push_back({b.m, b.n, b.k, b.a[i], b.lda, b.b[i], b.ldb, b.c[i], b.ldc});
    args.beta = b.beta;
    cpu::grouped_gemm(members.data(), int(members.size()), args);
  }
  for (std::size_t i = 0; i < s.rest.size(); ++i) {
    args.beta = s.rest_beta[i];
    cpu::grouped_gemm(&s.rest[i], 1, args);
  }
}

double worst_error(const expert_layout& l, const std::vector<std::vector<double>>& want) {
  double worst = 0;
  for (std::size_t g = 0; g < l.groups.size(); ++g) {
    const auto& x = l.groups[g];
    const auto* c = static_cast<const float*>(x.c);
    for (std::int64_t i = 0; i < x.m; ++i)
      for (std::int64_t j = 0; j < x.n; ++j) {
        const double w = want[g][std::size_t(i * x.n + j)];
        const double e = std::abs(double(c[i * x.ldc + j]) - w) / (1.0 + std::abs(w));
        worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(worst, e);
      }
  }
  return worst;
}

}  // namespace

TEST_CASE("split_into_batches batches the rows most groups share", "[kernels][grouped_gemm]") {
  grouped_gemm_args args;
  SECTION("a staircase over m: one level here, the next too small to batch") {
    // sorted 200 70 64 64 5 3: 64 rows of 4 groups cover the most (256 of 406)
    expert_layout l({64, 5, 200, 0, 70, 64, 3}, false, 0, 7, 9, args, 1);
    const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    REQUIRE(s.batches.size() == 1);
    CHECK(s.batches[0].m == 64);
    CHECK(s.batches[0].a.size() == 4);
    CHECK_FALSE(s.along_k);
    CHECK(s.batched_share == Approx(256.0 / 406.0));
    CHECK(s.rest.size() == 4);  // 136 of 200, 6 of 70, the 5 and the 3
  }
  SECTION("levels: each takes what most groups still have") {
    expert_layout l({100, 100, 100, 150, 150, 150}, false, 0, 4, 4, args, 2);
    const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    REQUIRE(s.batches.size() == 2);
    CHECK(s.batches[0].m == 100);
    CHECK(s.batches[0].a.size() == 6);
    CHECK(s.batches[1].m == 50);
    CHECK(s.batches[1].a.size() == 3);
    CHECK(s.rest.empty());
    CHECK(s.batched_share == Approx(1.0));
    const auto one = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float),
                                        /*max_levels=*/1);
    CHECK(one.batches.size() == 1);
    CHECK(one.rest.size() == 3);
  }
  SECTION("groups all of one shape: one batch, no rest") {
    expert_layout l({32, 32, 32}, false, 0, 5, 6, args, 3);
    const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    REQUIRE(s.batches.size() == 1);
    CHECK(s.rest.empty());
  }
  SECTION("k varying: one batch over the shared reduction, the rest adds to it") {
    expert_layout l({40, 48, 10, 44}, true, 6, 5, 0, args, 4);
    const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    REQUIRE(s.batches.size() == 1);
    CHECK(s.along_k);
    CHECK(s.batches[0].k == 40);
    CHECK(s.batches[0].beta == 0.0f);
    REQUIRE(s.rest.size() == 3);
    CHECK(s.rest_beta == std::vector<float>{1.0f, 0.0f, 1.0f});  // 8 of 48, the 10, 4 of 44
  }
  SECTION("a quantum: each batch's size a multiple of it, the rows below it in the rest") {
    // sorted 200 150 140 70 6: in 64s, 128 rows of 3 groups (384) cover more than 64 of 4
    // (256); then 64 of the 72 left of 200 and of the 70; rows under 64 are left
    expert_layout l({140, 6, 200, 70, 150}, false, 0, 4, 4, args, 6);
    const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float),
                                      /*max_levels=*/3, /*quantum=*/64);
    REQUIRE(s.batches.size() == 2);
    CHECK(s.batches[0].m == 128);
    CHECK(s.batches[0].a.size() == 3);
    CHECK(s.batches[1].m == 64);
    CHECK(s.batches[1].a.size() == 2);
    CHECK(s.rest.size() == 5);  // 12, 6, 8, 6 and 22 rows
    CHECK_THROWS_WITH(
        split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float), 3, 0),
        Catch::Contains("quantum 0 is below 1"));
  }
  SECTION("groups differing in n, or in both m and k: nothing batched") {
    expert_layout l({16, 16, 20}, false, 0, 4, 4, args, 5);
    l.groups[1].n = 3;
    auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    CHECK(s.batches.empty());
    CHECK(s.rest.size() == 3);
    l.groups[1].n = 4;
    l.groups[1].k = 3;
    s = split_into_batches(l.groups.data(), int(l.groups.size()), args, sizeof(float));
    CHECK(s.batches.empty());
    CHECK(s.batched_share == 0.0);
  }
}

TEST_CASE("the batches and the rest give the grouped product", "[kernels][grouped_gemm]") {
  std::uint32_t seed = 11;
  for (const bool along_k : {false, true})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          INFO("along k " << along_k << " trans_a " << trans_a << " trans_b " << trans_b << " beta "
                          << beta);
          grouped_gemm_args args;
          args.trans_a = trans_a;
          args.trans_b = trans_b;
          args.beta = beta;
          for (const std::int64_t quantum : {1, 16}) {
            INFO("quantum " << quantum);
            expert_layout l({33, 0, 17, 40, 33, 90, 1, 35}, along_k, 13, 11, 19, args, seed);
            const auto want = muster::test::plain_products(l, args);
            const auto s = split_into_batches(l.groups.data(), int(l.groups.size()), args,
                                              sizeof(float), 3, quantum);
            CHECK_FALSE(s.batches.empty());
            for (const auto& b : s.batches) CHECK((s.along_k ? b.k : b.m) % quantum == 0);
            run_split(s, args);
            CHECK(worst_error(l, want) <= 1e-5);
          }
          seed += 3;
        }
}

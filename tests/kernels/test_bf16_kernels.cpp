// The kernels' bf16: the rounding against known values and every bf16 value, and the bf16
// overloads of SwiGLU and the permutation against their fp32 kernels run on the same values: the
// bf16 ones compute in fp32 in the same order and round once, so they give exactly the fp32
// results rounded, over sizes on both sides of the CPU kernels' chunk.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "muster/kernels/bf16.hpp"
#include "muster/kernels/permute.hpp"
#include "muster/kernels/swiglu.hpp"
#include "tests/kernels/bf16_values.hpp"

using namespace muster::kernels;
using muster::test::bf16_draws;

namespace {

// Each bf16 is fp32 `want` rounded, reporting the first that is not.
void require_rounded(const std::vector<bf16>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << to_float(got[i]) << ", fp32 " << want[i]);
    REQUIRE(got[i].bits == to_bf16(want[i]).bits);
  }
}

}  // namespace

TEST_CASE("to_bf16 rounds to nearest even, as at::BFloat16", "[kernels][bf16]") {
  CHECK(to_bf16(1.0f).bits == 0x3f80);
  CHECK(to_bf16(-2.0f).bits == 0xc000);
  CHECK(to_bf16(-0.0f).bits == 0x8000);
  CHECK(to_bf16(1.0f + 0x1p-8f).bits == 0x3f80);         // a tie, to the even below
  CHECK(to_bf16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);     // a tie, to the even above
  CHECK(to_bf16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3f81);  // past the tie
  CHECK(to_bf16(std::numeric_limits<float>::infinity()).bits == 0x7f80);
  CHECK(to_bf16(-std::numeric_limits<float>::infinity()).bits == 0xff80);
  CHECK(to_bf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // past the largest bf16
  CHECK(to_bf16(std::nanf("")).bits == 0x7fc0);
  CHECK(to_bf16(-std::nanf("")).bits == 0x7fc0);
  CHECK(to_bf16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
  CHECK(to_float(bf16{0x3f80}) == 1.0f);
  CHECK(to_float(bf16{0x0001}) == 0x1p-133f);  // the smallest subnormal bf16
  for (unsigned bits = 0; bits <= 0xffff; ++bits) {
    const bf16 v{std::uint16_t(bits)};
    const float f = to_float(v);
    INFO("bits " << bits);
    if (std::isnan(f))
      REQUIRE(to_bf16(f).bits == 0x7fc0);
    else
      REQUIRE(to_bf16(f).bits == bits);
  }
}

TEST_CASE("the bf16 SwiGLU kernels are the fp32 ones on the same values, rounded once",
          "[kernels][bf16][swiglu]") {
  std::uint32_t seed = 71;
  for (const std::size_t n : {1u, 7u, 511u, 512u, 513u, 1500u}) {
    INFO("n " << n);
    auto gate = bf16_draws(n, seed++);
    gate[0] = to_bf16(-90.0f);  // where the exponential underflows
    const auto up = bf16_draws(n, seed++), grad = bf16_draws(n, seed++);
    const auto a = muster::test::to_float(gate), b = muster::test::to_float(up),
               g = muster::test::to_float(grad);
    std::vector<float> y(n), da(n), db(n);
    cpu::swiglu_forward(a.data(), b.data(), y.data(), std::int64_t(n));
    cpu::swiglu_backward(a.data(), b.data(), g.data(), da.data(), db.data(), std::int64_t(n));
    std::vector<bf16> y16(n), da16(n), db16(n);
    cpu::swiglu_forward(gate.data(), up.data(), y16.data(), std::int64_t(n));
    cpu::swiglu_backward(gate.data(), up.data(), grad.data(), da16.data(), db16.data(),
                         std::int64_t(n));
    require_rounded(y16, y);
    require_rounded(da16, da);
    require_rounded(db16, db);
  }
}

TEST_CASE("the bf16 permutation kernels are the fp32 ones on the same values, rounded once",
          "[kernels][bf16][permute]") {
  std::uint32_t seed = 81;
  for (const std::int64_t hidden : {1, 33, 512, 700}) {
    permute_shape s;
    s.num_tokens = 23;
    s.topk = 3;
    s.num_experts = 5;
    s.hidden = hidden;
    INFO("hidden " << hidden);
    const auto n = std::size_t(s.num_tokens * s.topk);
    std::vector<std::int64_t> experts(n), counts(5), offsets(6), row_of(n), source_of(n);
    for (std::size_t a = 0; a < n; ++a) experts[a] = a % 11 == 4 ? -1 : std::int64_t(a * 7 % 5);
    cpu::permute_index(experts.data(), counts.data(), offsets.data(), row_of.data(),
                       source_of.data(), s);
    const auto rows = offsets[5];
    const auto h = std::size_t(hidden);
    const auto x16 = bf16_draws(std::size_t(s.num_tokens) * h, seed++);
    std::vector<bf16> permuted(std::size_t(rows) * h);
    cpu::permute_rows(x16.data(), source_of.data(), rows, permuted.data(), s);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < h; ++i)
        REQUIRE(permuted[std::size_t(r) * h + i].bits ==
                x16[std::size_t(source_of[std::size_t(r)] / s.topk) * h + i].bits);

    const auto rows16 = bf16_draws(std::size_t(rows) * h, seed++);
    const auto grad16 = bf16_draws(std::size_t(s.num_tokens) * h, seed++);
    const auto weights = muster::test::normal_draws(n, seed++);
    const auto rows32 = muster::test::to_float(rows16), grad32 = muster::test::to_float(grad16);
    std::vector<float> y(std::size_t(s.num_tokens) * h), grad_rows(std::size_t(rows) * h),
        grad_w(n), grad_w16(n);
    cpu::unpermute(rows32.data(), row_of.data(), weights.data(), y.data(), s);
    cpu::unpermute_backward(rows32.data(), row_of.data(), weights.data(), grad32.data(),
                            grad_rows.data(), grad_w.data(), s);
    std::vector<bf16> y16(y.size()), grad_rows16(grad_rows.size());
    cpu::unpermute(rows16.data(), row_of.data(), weights.data(), y16.data(), s);
    cpu::unpermute_backward(rows16.data(), row_of.data(), weights.data(), grad16.data(),
                            grad_rows16.data(), grad_w16.data(), s);
    require_rounded(y16, y);
    require_rounded(grad_rows16, grad_rows);
    for (std::size_t a = 0; a < n; ++a) {
      INFO("assignment " << a);
      REQUIRE(grad_w16[a] == Approx(grad_w[a]).epsilon(1e-5).margin(1e-5));
    }
    // without weights: each token's rows summed, and the gradient copied to them
    cpu::unpermute(rows16.data(), row_of.data(), nullptr, y16.data(), s);
    cpu::unpermute(rows32.data(), row_of.data(), nullptr, y.data(), s);
    require_rounded(y16, y);
  }
}

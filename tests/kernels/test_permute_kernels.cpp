// The permutation kernels on the CPU against plain references: the index against a stable sort
// of the assignments by expert (dropped ones left out), the gather, the weighted combine, and
// the combine's backward against the derivatives of sum(grad_y * y), over small, odd and large
// shapes with dropped assignments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "muster/kernels/permute.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;

namespace {

// Random experts in [0, E) with about one in ten dropped (E, or -1).
std::vector<std::int64_t> random_experts(const permute_shape& s, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, s.num_experts - 1);
  std::vector<std::int64_t> out(std::size_t(s.num_tokens * s.topk));
  for (auto& e : out) e = gen() % 10 == 0 ? (gen() % 2 ? s.num_experts : -1) : pick(gen);
  return out;
}

}  // namespace

TEST_CASE("the permutation kernels match their references", "[kernels][permute]") {
  std::uint32_t seed = 21;
  for (const auto& [tokens, topk, experts, hidden] :
       std::vector<std::tuple<std::int64_t, int, std::int64_t, std::int64_t>>{
           {0, 2, 4, 8}, {1, 1, 1, 1}, {5, 2, 3, 7}, {37, 3, 13, 33}, {300, 8, 64, 64}}) {
    permute_shape s;
    s.num_tokens = tokens;
    s.topk = topk;
    s.num_experts = experts;
    s.hidden = hidden;
    INFO("tokens " << tokens << " topk " << topk << " experts " << experts << " hidden " << hidden);
    const auto n = std::size_t(tokens * topk);
    const auto assigned = random_experts(s, seed++);
    const auto num_experts = static_cast<std::size_t>(experts);
    std::vector<std::int64_t> counts(num_experts), offsets(num_experts + 1), row_of(n),
        source_of(n);
    cpu::permute_index(assigned.data(), counts.data(), offsets.data(), row_of.data(),
                       source_of.data(), s);
    // reference: kept assignments stably sorted by expert
    std::vector<std::int64_t> kept;
    for (std::size_t a = 0; a < n; ++a)
      if (assigned[a] >= 0 && assigned[a] < experts) kept.push_back(std::int64_t(a));
    std::stable_sort(kept.begin(), kept.end(), [&](auto x, auto y) {
      return assigned[std::size_t(x)] < assigned[std::size_t(y)];
    });
    const auto rows = std::int64_t(kept.size());
    REQUIRE(offsets[std::size_t(experts)] == rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      REQUIRE(source_of[std::size_t(r)] == kept[std::size_t(r)]);
      REQUIRE(row_of[std::size_t(kept[std::size_t(r)])] == r);
    }
    for (std::size_t a = 0; a < n; ++a)
      if (assigned[a] < 0 || assigned[a] >= experts) REQUIRE(row_of[a] == -1);
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto c = std::count(assigned.begin(), assigned.end(), e);
      REQUIRE(counts[std::size_t(e)] == c);
      REQUIRE(offsets[std::size_t(e) + 1] - offsets[std::size_t(e)] == c);
    }

    const auto x = muster::test::normal_draws(std::size_t(tokens * hidden), seed++);
    std::vector<float> permuted(std::size_t(rows * hidden));
    cpu::permute_rows(x.data(), source_of.data(), rows, permuted.data(), s);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < hidden; ++i)
        REQUIRE(permuted[std::size_t(r * hidden + i)] ==
                x[std::size_t((source_of[std::size_t(r)] / topk) * hidden + i)]);

    // the combine and its backward (the experts' rows: fresh draws)
    const auto expert_rows = muster::test::normal_draws(std::size_t(rows * hidden), seed++);
    const auto weights = muster::test::normal_draws(n, seed++);
    const auto grad_y = muster::test::normal_draws(std::size_t(tokens * hidden), seed++);
    std::vector<float> y(std::size_t(tokens * hidden)), y1(y.size());
    cpu::unpermute(expert_rows.data(), row_of.data(), weights.data(), y.data(), s);
    cpu::unpermute(expert_rows.data(), row_of.data(), nullptr, y1.data(), s);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t i = 0; i < hidden; ++i) {
        double want = 0, want1 = 0;
        for (int j = 0; j < topk; ++j) {
          const auto a = std::size_t(t * topk + j);
          if (row_of[a] < 0) continue;
          want += double(weights[a]) * expert_rows[std::size_t(row_of[a] * hidden + i)];
          want1 += expert_rows[std::size_t(row_of[a] * hidden + i)];
        }
        REQUIRE(y[std::size_t(t * hidden + i)] == Approx(want).margin(1e-5));
        REQUIRE(y1[std::size_t(t * hidden + i)] == Approx(want1).margin(1e-5));
      }
    std::vector<float> grad_rows(std::size_t(rows * hidden), 7.0f), grad_w(n, 7.0f);
    cpu::unpermute_backward(expert_rows.data(), row_of.data(), weights.data(), grad_y.data(),
                            grad_rows.data(), grad_w.data(), s);
    for (std::size_t a = 0; a < n; ++a) {
      const auto t = std::int64_t(a) / topk;
      if (row_of[a] < 0) {
        REQUIRE(grad_w[a] == 0.0f);
        continue;
      }
      double dot = 0;
      for (std::int64_t i = 0; i < hidden; ++i) {
        const auto g = grad_y[std::size_t(t * hidden + i)];
        dot += double(g) * expert_rows[std::size_t(row_of[a] * hidden + i)];
        REQUIRE(grad_rows[std::size_t(row_of[a] * hidden + i)] ==
                Approx(double(weights[a]) * g).margin(1e-6));
      }
      REQUIRE(grad_w[a] == Approx(dot).margin(1e-4));
    }
  }
}

TEST_CASE("the permutation kernels refuse sizes out of range, naming them", "[kernels][permute]") {
  permute_shape s;
  s.topk = 0;
  CHECK_THROWS_WITH(check_permute_shape(s), Catch::Contains("topk 0 is below 1"));
  s.topk = 1;
  s.num_experts = 0;
  CHECK_THROWS_WITH(check_permute_shape(s), Catch::Contains("num_experts 0 is below 1"));
}

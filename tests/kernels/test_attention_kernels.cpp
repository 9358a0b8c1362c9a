// The causal attention kernels on the CPU against attention written out in fp64 (every query
// scoring exactly its allowed keys), and that fp64 backward against central finite differences,
// over rows of three blocks (the last one short), packed documents, grouped and ungrouped heads.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "muster/kernels/causal_attention.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;

namespace {

const auto draws = muster::test::normal_draws;

// first_key of rows whose documents start at `starts` (each list begins with 0)
std::vector<std::int64_t> key_ranges(std::int64_t seq,
                                     const std::vector<std::vector<std::int64_t>>& starts) {
  std::vector<std::int64_t> first;
  for (const auto& row : starts)
    for (std::int64_t i = 0, doc = 0; i < seq; ++i) {
      while (doc + 1 < std::int64_t(row.size()) && row[doc + 1] <= i) ++doc;
      first.push_back(row[doc]);
    }
  return first;
}

// Attention in fp64, token-major as the kernel: out and, given grad_out, the three gradients.
struct reference {
  cpu::attention_dims d;
  std::vector<std::int64_t> first;
  std::int64_t qi(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return ((b * d.seq + s) * d.heads + h) * d.head_dim;
  }
  std::int64_t ki(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return ((b * d.seq + s) * d.kv_heads + h * d.kv_heads / d.heads) * d.head_dim;
  }
  // probabilities of query (b, i, h) over keys first .. i
  std::vector<double> probs(const std::vector<double>& q, const std::vector<double>& k,
                            std::int64_t b, std::int64_t i, std::int64_t h) const {
    const double scale = 1 / std::sqrt(double(d.head_dim));
    const auto lo = first[b * d.seq + i];
    std::vector<double> p;
    double m = -INFINITY, sum = 0;
    for (auto j = lo; j <= i; ++j) {
      double s = 0;
      for (std::int64_t c = 0; c < d.head_dim; ++c) s += q[qi(b, i, h) + c] * k[ki(b, j, h) + c];
      p.push_back(s * scale);
      m = std::max(m, s * scale);
    }
    for (auto& x : p) sum += (x = std::exp(x - m));
    for (auto& x : p) x /= sum;
    return p;
  }
  std::vector<double> forward(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v) const {
    std::vector<double> out(q.size(), 0.0);
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t i = 0; i < d.seq; ++i)
        for (std::int64_t h = 0; h < d.heads; ++h) {
          const auto p = probs(q, k, b, i, h);
          const auto lo = first[b * d.seq + i];
          for (auto j = lo; j <= i; ++j)
            for (std::int64_t c = 0; c < d.head_dim; ++c)
              out[qi(b, i, h) + c] += p[j - lo] * v[ki(b, j, h) + c];
        }
    return out;
  }
  void backward(const std::vector<double>& q, const std::vector<double>& k,
                const std::vector<double>& v, const std::vector<double>& g, std::vector<double>& dq,
                std::vector<double>& dk, std::vector<double>& dv) const {
    const double scale = 1 / std::sqrt(double(d.head_dim));
    dq.assign(q.size(), 0.0);
    dk.assign(k.size(), 0.0);
    dv.assign(v.size(), 0.0);
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t i = 0; i < d.seq; ++i)
        for (std::int64_t h = 0; h < d.heads; ++h) {
          const auto p = probs(q, k, b, i, h);
          const auto lo = first[b * d.seq + i];
          std::vector<double> dp;
          double dot = 0;
          for (auto j = lo; j <= i; ++j) {
            double s = 0;
            for (std::int64_t c = 0; c < d.head_dim; ++c) {
              s += g[qi(b, i, h) + c] * v[ki(b, j, h) + c];
              dv[ki(b, j, h) + c] += p[j - lo] * g[qi(b, i, h) + c];
            }
            dp.push_back(s);
            dot += s * p[j - lo];
          }
          for (auto j = lo; j <= i; ++j) {
            const double ds = p[j - lo] * (dp[j - lo] - dot) * scale;
            for (std::int64_t c = 0; c < d.head_dim; ++c) {
              dq[qi(b, i, h) + c] += ds * k[ki(b, j, h) + c];
              dk[ki(b, j, h) + c] += ds * q[qi(b, i, h) + c];
            }
          }
        }
  }
};

std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

// The kernel's forward and backward against the fp64 reference for these dims and documents.
void check_against_reference(const cpu::attention_dims& d, const std::vector<std::int64_t>& first) {
  const auto nq = std::size_t(d.batch * d.seq * d.heads * d.head_dim);
  const auto nk = std::size_t(d.batch * d.seq * d.kv_heads * d.head_dim);
  const auto q = draws(nq, 1), k = draws(nk, 2), v = draws(nk, 3), g = draws(nq, 4);
  const float scale = float(1 / std::sqrt(double(d.head_dim)));
  std::vector<float> out(nq), probs(cpu::causal_attention_saved_floats(d, first.data()));
  cpu::causal_attention_forward(d, q.data(), k.data(), v.data(), first.data(), scale, out.data(),
                                probs.data());
  const reference ref{d, first};
  check_close(out, ref.forward(widen(q), widen(k), widen(v)), 2e-5);

  std::vector<float> dq(nq, NAN), dk(nk, NAN), dv(nk, NAN);  // every element is written
  cpu::causal_attention_backward(d, q.data(), k.data(), v.data(), first.data(), scale, probs.data(),
                                 g.data(), dq.data(), dk.data(), dv.data());
  std::vector<double> want_dq, want_dk, want_dv;
  ref.backward(widen(q), widen(k), widen(v), widen(g), want_dq, want_dk, want_dv);
  check_close(dq, want_dq, 1e-4);
  check_close(dk, want_dk, 1e-4);
  check_close(dv, want_dv, 1e-4);
}

}  // namespace

TEST_CASE("the fp64 attention reference's backward matches central finite differences",
          "[kernels]") {
  const cpu::attention_dims d{1, 9, 4, 2, 4};
  const reference ref{d, key_ranges(9, {{0, 4}})};
  const auto nq = std::size_t(9 * 4 * 4), nk = std::size_t(9 * 2 * 4);
  auto q = widen(draws(nq, 5)), k = widen(draws(nk, 6)), v = widen(draws(nk, 7)),
       g = widen(draws(nq, 8));
  std::vector<double> dq, dk, dv;
  ref.backward(q, k, v, g, dq, dk, dv);
  auto loss = [&] {
    const auto out = ref.forward(q, k, v);
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * g[i];
    return l;
  };
  const double h = 1e-6;
  auto numeric = [&](std::vector<double>& x, std::size_t i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    return (up - down) / (2 * h);
  };
  for (std::size_t i = 0; i < nq; ++i) REQUIRE(dq[i] == Approx(numeric(q, i)).margin(1e-7));
  for (std::size_t i = 0; i < nk; ++i) REQUIRE(dk[i] == Approx(numeric(k, i)).margin(1e-7));
  for (std::size_t i = 0; i < nk; ++i) REQUIRE(dv[i] == Approx(numeric(v, i)).margin(1e-7));
}

TEST_CASE("causal attention over three blocks and packed documents equals the fp64 reference",
          "[kernels]") {
  // 150 positions: blocks of 64, 64 and 22. Row 0: documents at 0 and 40 (a boundary inside a
  // block); row 1: at 0, 64 and 100 (the second block's keys start at 64, not 0).
  const cpu::attention_dims d{2, 150, 4, 2, 8};
  check_against_reference(d, key_ranges(150, {{0, 40}, {0, 64, 100}}));
}

TEST_CASE("causal attention with one kv head per query head, in one short block", "[kernels]") {
  const cpu::attention_dims d{2, 37, 3, 3, 5};
  check_against_reference(d, key_ranges(37, {{0}, {0, 1, 20, 36}}));
}

TEST_CASE("the saved probabilities cover only the keys each block may see", "[kernels]") {
  const cpu::attention_dims d{2, 150, 4, 1, 8};
  const auto first = key_ranges(150, {{0}, {0, 64}});
  // row 0: 64 x 64, 64 x 128, 22 x 150; row 1: 64 x 64, then keys from 64: 64 x 64, 22 x 86
  const std::int64_t want = 4 * (64 * 64 + 64 * 128 + 22 * 150) + 4 * (64 * 64 + 64 * 64 + 22 * 86);
  CHECK(cpu::causal_attention_saved_floats(d, first.data()) == want);
}

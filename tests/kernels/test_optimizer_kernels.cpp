// The optimizer kernels on the CPU against the update written out in fp64, element by element,
// and the sum of squares against an exact-enough fp64 sum; odd sizes exercise the tails.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "muster/kernels/optimizer.hpp"

using namespace muster::kernels;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace

TEST_CASE("adamw_update matches torch.optim.AdamW's formula over several steps", "[kernels]") {
  const std::size_t n = 1037;
  auto param = random_floats(n, 1, 1.0f);
  std::vector<float> m(n, 0.0f), v(n, 0.0f), mask(n);
  for (std::size_t i = 0; i < n; ++i) mask[i] = i % 3 == 0 ? 0.0f : 1.0f;  // norms: no decay
  std::vector<double> ref_p(param.begin(), param.end()), ref_m(n, 0.0), ref_v(n, 0.0);
  adamw_scalars s;
  s.lr = 1e-2, s.beta1 = 0.9, s.beta2 = 0.95, s.eps = 1e-8, s.weight_decay = 0.1;
  for (std::int64_t step = 1; step <= 4; ++step) {
    const auto grad = random_floats(n, 100 + static_cast<std::uint32_t>(step), 0.5f);
    s.step = step;
    cpu::adamw_update(s, param.data(), grad.data(), m.data(), v.data(), mask.data(),
                      static_cast<std::int64_t>(n));
    const double bias1 = 1 - std::pow(s.beta1, double(step)),
                 bias2 = 1 - std::pow(s.beta2, double(step));
    for (std::size_t i = 0; i < n; ++i) {
      ref_p[i] *= 1 - s.lr * s.weight_decay * mask[i];
      ref_m[i] = s.beta1 * ref_m[i] + (1 - s.beta1) * grad[i];
      ref_v[i] = s.beta2 * ref_v[i] + (1 - s.beta2) * double(grad[i]) * grad[i];
      ref_p[i] -= s.lr / bias1 * ref_m[i] / (std::sqrt(ref_v[i]) / std::sqrt(bias2) + s.eps);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    INFO("element " << i);
    REQUIRE(param[i] == Approx(ref_p[i]).epsilon(1e-5).margin(1e-6));
    REQUIRE(m[i] == Approx(ref_m[i]).epsilon(1e-5).margin(1e-7));
    REQUIRE(v[i] == Approx(ref_v[i]).epsilon(1e-5).margin(1e-8));
  }
}

TEST_CASE("adamw_update without a decay mask leaves the weights undecayed", "[kernels]") {
  std::vector<float> p{1.0f, -2.0f, 3.0f}, g{0.0f, 0.0f, 0.0f}, m(3, 0.0f), v(3, 0.0f);
  adamw_scalars s;
  s.lr = 0.5, s.weight_decay = 0.1;
  cpu::adamw_update(s, p.data(), g.data(), m.data(), v.data(), nullptr, 3);
  CHECK(p == std::vector<float>{1.0f, -2.0f, 3.0f});  // zero gradient, no decay: unchanged
  std::vector<float> mask{1.0f, 0.0f, 1.0f};
  cpu::adamw_update(s, p.data(), g.data(), m.data(), v.data(), mask.data(), 3);
  CHECK(p[0] == Approx(0.95f));
  CHECK(p[1] == -2.0f);
  CHECK(p[2] == Approx(2.85f));
}

TEST_CASE("sum_of_squares accumulates in fp64, tails included", "[kernels]") {
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 100003u}) {
    const auto x = random_floats(n, static_cast<std::uint32_t>(n), 3.0f);
    long double exact = 0;
    for (float f : x) exact += static_cast<long double>(f) * f;
    INFO("n = " << n);
    CHECK(cpu::sum_of_squares(x.data(), static_cast<std::int64_t>(n)) ==
          Approx(static_cast<double>(exact)).epsilon(1e-13));
  }
  // fp32 accumulation would lose the small square on top of 2^22 ones
  std::vector<float> ones((1u << 25) / 8, 1.0f);
  ones.push_back(0.5f);
  CHECK(cpu::sum_of_squares(ones.data(), static_cast<std::int64_t>(ones.size())) ==
        double((1u << 25) / 8) + 0.25);
}

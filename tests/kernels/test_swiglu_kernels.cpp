// The SwiGLU kernels on the CPU against silu written out in fp64, over ordinary values, the
// extremes of fp32's exp (where the kernel's exp clamps) and odd sizes (the vector tails).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "muster/kernels/swiglu.hpp"

using namespace muster::kernels;

namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Inputs: normal draws, then values out to where exp over/underflows.
std::vector<float> gates(std::size_t n) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  const float extremes[] = {0.0f,   -0.0f, 1e-8f,  -1e-8f, 20.0f,   -20.0f, 87.0f,
                            -87.0f, 88.5f, -88.5f, 100.0f, -100.0f, 1e30f,  -1e30f};
  for (std::size_t i = 0; i < std::size(extremes) && i < n; ++i) v[i] = extremes[i];
  return v;
}

}  // namespace

TEST_CASE("swiglu_forward is silu(gate) * up", "[kernels]") {
  for (std::size_t n : {1u, 3u, 8u, 17u, 4099u}) {
    const auto a = gates(n);
    std::vector<float> b(n), out(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = 0.5f + float(i % 7) * 0.25f;
    cpu::swiglu_forward(a.data(), b.data(), out.data(), static_cast<std::int64_t>(n));
    for (std::size_t i = 0; i < n; ++i) {
      const double want = double(a[i]) * sigmoid(a[i]) * b[i];
      INFO("n " << n << ", gate " << a[i]);
      REQUIRE(out[i] == Approx(want).epsilon(2e-6).margin(1e-30));
    }
  }
}

TEST_CASE("swiglu_backward gives silu's derivative times up, and silu for up", "[kernels]") {
  const std::size_t n = 1031;
  const auto a = gates(n);
  std::vector<float> b(n), g(n), da(n), db(n);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = 1.5f - float(i % 5) * 0.5f;
    g[i] = float(i % 3) - 0.75f;
  }
  cpu::swiglu_backward(a.data(), b.data(), g.data(), da.data(), db.data(),
                       static_cast<std::int64_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const double s = sigmoid(a[i]);
    INFO("gate " << a[i]);
    REQUIRE(db[i] == Approx(double(g[i]) * a[i] * s).epsilon(2e-6).margin(1e-30));
    // 1 + a * (1 - s) cancels near a = -1.28: the error scales with its terms, not the result
    const double terms = std::abs(double(g[i]) * b[i]) * s * (1 + std::abs(a[i]));
    REQUIRE(da[i] == Approx(double(g[i]) * b[i] * s * (1 + a[i] * (1 - s)))
                         .epsilon(5e-6)
                         .margin(std::max(1e-6 * terms, 1e-30)));
  }
}

TEST_CASE("swiglu passes NaN through", "[kernels]") {
  const float nan = std::nanf("");
  std::vector<float> a{nan, 1.0f, nan}, b{1.0f, nan, 2.0f}, out(3), g{1.0f, 1.0f, 1.0f}, da(3),
      db(3);
  cpu::swiglu_forward(a.data(), b.data(), out.data(), 3);
  cpu::swiglu_backward(a.data(), b.data(), g.data(), da.data(), db.data(), 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(std::isnan(out[i]));
    CHECK(std::isnan(da[i]));
  }
  CHECK(std::isnan(db[0]));
  CHECK(db[1] == Approx(1.0 / (1.0 + std::exp(-1.0))));  // silu(1); up's NaN does not enter
}

// Packed rows (gate | up): each row as the elementwise functions give it on its two halves,
// the gradients back in the packed layout; fp32 and bf16, widths with vector tails.
TEST_CASE("swiglu over packed rows is the elementwise SwiGLU of each row's halves", "[kernels]") {
  for (const std::int64_t width : {1, 5, 16, 37}) {
    const std::int64_t rows = 7;
    const auto n = static_cast<std::size_t>(rows * width);
    INFO("width " << width);
    const auto gate_up = gates(2 * n);
    std::vector<float> grad_out(n);
    for (std::size_t i = 0; i < grad_out.size(); ++i) grad_out[i] = 0.25f * float(i % 11) - 1.0f;
    std::vector<float> out(n), grad(2 * n);
    cpu::swiglu_rows_forward(gate_up.data(), out.data(), rows, width);
    cpu::swiglu_rows_backward(gate_up.data(), grad_out.data(), grad.data(), rows, width);
    std::vector<bf16> gate_up16(gate_up.size()), grad_out16(grad_out.size());
    for (std::size_t i = 0; i < gate_up.size(); ++i) gate_up16[i] = to_bf16(gate_up[i]);
    for (std::size_t i = 0; i < grad_out.size(); ++i) grad_out16[i] = to_bf16(grad_out[i]);
    std::vector<bf16> out16(out.size()), grad16(grad.size());
    cpu::swiglu_rows_forward(gate_up16.data(), out16.data(), rows, width);
    cpu::swiglu_rows_backward(gate_up16.data(), grad_out16.data(), grad16.data(), rows, width);
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto w = std::size_t(width), at = std::size_t(r) * 2 * w, o = std::size_t(r) * w;
      std::vector<float> y(w), da(w), db(w);
      cpu::swiglu_forward(&gate_up[at], &gate_up[at + w], y.data(), width);
      cpu::swiglu_backward(&gate_up[at], &gate_up[at + w], &grad_out[o], da.data(), db.data(),
                           width);
      std::vector<bf16> y16(w), da16(w), db16(w);
      cpu::swiglu_forward(&gate_up16[at], &gate_up16[at + w], y16.data(), width);
      cpu::swiglu_backward(&gate_up16[at], &gate_up16[at + w], &grad_out16[o], da16.data(),
                           db16.data(), width);
      for (std::size_t j = 0; j < w; ++j) {
        INFO("row " << r << " column " << j);
        // bit for bit: the same functions on the same values (NaN where exp overflows too)
        const auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
        REQUIRE(same(out[o + j], y[j]));
        REQUIRE(same(grad[at + j], da[j]));
        REQUIRE(same(grad[at + w + j], db[j]));
        REQUIRE(out16[o + j].bits == y16[j].bits);
        REQUIRE(grad16[at + j].bits == da16[j].bits);
        REQUIRE(grad16[at + w + j].bits == db16[j].bits);
      }
    }
  }
}

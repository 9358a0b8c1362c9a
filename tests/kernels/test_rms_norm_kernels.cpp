// The RMSNorm kernels on the CPU against the definition in fp64, and the backward against
// central finite differences of the fp64 definition, over odd widths (the vector tails).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "muster/kernels/rms_norm.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;

namespace {

const auto draws = muster::test::normal_draws;

// sum_j g_j * y_j(x) for one row in fp64, y = w * x / sqrt(mean(x^2) + eps)
double weighted_output(const std::vector<double>& x, const std::vector<float>& w,
                       const std::vector<float>& g, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  const double s = 1 / std::sqrt(ms / double(x.size()) + eps);
  double out = 0;
  for (std::size_t j = 0; j < x.size(); ++j) out += g[j] * w[j] * x[j] * s;
  return out;
}

}  // namespace

TEST_CASE("rms_norm_forward is w * x / sqrt(mean(x^2) + eps) per row", "[kernels]") {
  const std::int64_t rows = 5, dim = 37;
  const auto x = draws(rows * dim, 1), w = draws(dim, 2);
  std::vector<float> y(rows * dim), rstd(rows);
  cpu::rms_norm_forward(x.data(), w.data(), 1e-6f, rows, dim, y.data(), rstd.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (std::int64_t j = 0; j < dim; ++j) ms += double(x[r * dim + j]) * x[r * dim + j];
    const double s = 1 / std::sqrt(ms / dim + 1e-6);
    CHECK(rstd[r] == Approx(s).epsilon(1e-6));
    for (std::int64_t j = 0; j < dim; ++j)
      REQUIRE(y[r * dim + j] == Approx(w[j] * x[r * dim + j] * s).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("rms_norm_backward matches finite differences and sums the weight's gradient",
          "[kernels]") {
  const std::int64_t rows = 3, dim = 13;
  const double eps = 1e-5;
  const auto x = draws(rows * dim, 3), w = draws(dim, 4), g = draws(rows * dim, 5);
  std::vector<float> y(rows * dim), rstd(rows), dx(rows * dim);
  std::vector<float> dw(dim, 1.0f);  // accumulated into
  cpu::rms_norm_forward(x.data(), w.data(), float(eps), rows, dim, y.data(), rstd.data());
  cpu::rms_norm_backward(x.data(), w.data(), rstd.data(), g.data(), rows, dim, dx.data(),
                         dw.data());
  std::vector<double> want_dw(dim, 1.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(x.begin() + r * dim, x.begin() + (r + 1) * dim);
    std::vector<float> grow(g.begin() + r * dim, g.begin() + (r + 1) * dim);
    for (std::int64_t j = 0; j < dim; ++j) {
      const double h = 1e-6;
      auto up = row, down = row;
      up[j] += h;
      down[j] -= h;
      const double fd =
          (weighted_output(up, w, grow, eps) - weighted_output(down, w, grow, eps)) / (2 * h);
      INFO("row " << r << " column " << j);
      REQUIRE(dx[r * dim + j] == Approx(fd).epsilon(1e-4).margin(1e-5));
      want_dw[j] += grow[j] * row[j] * rstd[r];
    }
  }
  for (std::int64_t j = 0; j < dim; ++j) CHECK(dw[j] == Approx(want_dw[j]).epsilon(1e-5));
}

TEST_CASE(
    "bf16 rows: the normalised row rounded to bf16 before the weight, grad_x the fp32 one "
    "rounded",
    "[kernels]") {
  const std::int64_t rows = 4, dim = 45;
  const auto xf = draws(rows * dim, 6), w = draws(dim, 7), g = draws(rows * dim, 8);
  std::vector<bf16> x(xf.size());
  std::vector<float> xr(xf.size());  // x's bf16 values as fp32
  for (std::size_t i = 0; i < xf.size(); ++i) {
    x[i] = to_bf16(xf[i]);
    xr[i] = to_float(x[i]);
  }
  std::vector<float> y(rows * dim), rstd(rows), y32(rows * dim), rstd32(rows);
  cpu::rms_norm_forward(x.data(), w.data(), 1e-6f, rows, dim, y.data(), rstd.data());
  cpu::rms_norm_forward(xr.data(), w.data(), 1e-6f, rows, dim, y32.data(), rstd32.data());
  CHECK(rstd == rstd32);  // the same sums of the same values
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < dim; ++j) {
      const auto i = std::size_t(r * dim + j);
      REQUIRE(y[i] == w[std::size_t(j)] * to_float(to_bf16(xr[i] * rstd[std::size_t(r)])));
    }
  std::vector<bf16> dx(rows * dim);
  std::vector<float> dx32(rows * dim), dw(dim, 0.5f), dw32(dim, 0.5f), want_dw(dim, 0.5f);
  cpu::rms_norm_backward(x.data(), w.data(), rstd.data(), g.data(), rows, dim, dx.data(),
                         dw.data());
  cpu::rms_norm_backward(xr.data(), w.data(), rstd.data(), g.data(), rows, dim, dx32.data(),
                         dw32.data());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < dim; ++j) {
      const auto i = std::size_t(r * dim + j);
      INFO("row " << r << " column " << j);
      REQUIRE(dx[i].bits == to_bf16(dx32[i]).bits);
      want_dw[std::size_t(j)] += g[i] * to_float(to_bf16(xr[i] * rstd[std::size_t(r)]));
    }
  CHECK(dw == want_dw);
}

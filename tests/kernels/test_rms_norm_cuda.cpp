// The RMSNorm CUDA kernels against the CPU reference (kernels/cpu/rms_norm.cpp): one row, odd
// widths (a float a lane), aligned widths (16 bytes a lane), rows off 16 bytes, more rows than
// the weight gradient's 512 blocks of sums hold at 64 rows, a row of large and one of tiny
// values;
// each output within a normalised bound, printing the first mismatches. Without a CUDA device:
// "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "muster/kernels/rms_norm.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;
using muster::test::compare;
using muster::test::device_buffer;

namespace {

// The values of `b` from `offset`, n of them.
std::vector<float> slice(const device_buffer<float>& b, std::size_t offset, std::size_t n) {
  const auto all = b.host();
  return {all.begin() + std::ptrdiff_t(offset), all.begin() + std::ptrdiff_t(offset + n)};
}

// extremes: the first row's values times 1e4, the second's times 1e-4, where eps matters (the
// comparisons are normalised by the largest value, so only one shape has them)
void check_rms_norm(std::int64_t rows, std::int64_t dim, std::size_t offset, std::uint32_t seed,
                    bool extremes = false) {
  const auto n = std::size_t(rows * dim), d = std::size_t(dim), r = std::size_t(rows);
  auto x = muster::test::normal_draws(n + offset, seed);
  const auto w = muster::test::normal_draws(d + offset, seed + 1),
             g = muster::test::normal_draws(n + offset, seed + 2);
  if (extremes) {
    for (std::size_t j = 0; j < d; ++j) x[offset + j] *= 1e4f, x[offset + d + j] *= 1e-4f;
  }
  std::vector<float> y(n), rstd(r), dx(n), dw(d, 0.5f);
  cpu::rms_norm_forward(x.data() + offset, w.data() + offset, 1e-6f, rows, dim, y.data(),
                        rstd.data());
  cpu::rms_norm_backward(x.data() + offset, w.data() + offset, rstd.data(), g.data() + offset, rows,
                         dim, dx.data(), dw.data());

  device_buffer<float> d_x(x), d_w(w), d_g(g), d_y(n + offset), d_rstd(r), d_dx(n + offset),
      d_dw(std::vector<float>(d, 0.5f)),
      d_partials(std::size_t(cuda::rms_norm_backward_partials(rows, dim)));
  cuda::rms_norm_forward(d_x.ptr + offset, d_w.ptr + offset, 1e-6f, rows, dim, d_y.ptr + offset,
                         d_rstd.ptr, nullptr);
  cuda::rms_norm_backward(d_x.ptr + offset, d_w.ptr + offset, d_rstd.ptr, d_g.ptr + offset, rows,
                          dim, d_dx.ptr + offset, d_dw.ptr, d_partials.ptr, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  std::string y_report, rstd_report, dx_report, dw_report;
  const double y_err = compare(slice(d_y, offset, n), y, 1e-5, y_report);
  const double rstd_err = compare(d_rstd.host(), rstd, 1e-5, rstd_report);
  const double dx_err = compare(slice(d_dx, offset, n), dx, 1e-5, dx_report);
  // summed over every row, in another order than the CPU's
  const double dw_err = compare(d_dw.host(), dw, 1e-4, dw_report);
  INFO("y:\n"
       << y_report << "rstd:\n"
       << rstd_report << "grad_x:\n"
       << dx_report << "grad_w:\n"
       << dw_report);
  CHECK(y_err <= 1e-5);
  CHECK(rstd_err <= 1e-5);
  CHECK(dx_err <= 1e-5);
  CHECK(dw_err <= 1e-4);
}

// bf16 rows with an fp32 weight (the attention's q and k norms under bf16 autocast): y, rstd and
// grad_w fp32, grad_x bf16. rstd against the CPU's; the rest against what the GPU's own rstd
// gives, so that the bf16 rounding is checked, not hidden in a tolerance: y exactly
// (w * bf16(x * rstd), the same fp32 products), grad_w within 1e-5 of its fp64 sums, and each
// grad_x within half a bf16 step of the fp64 value (rounded to nearest) plus 1e-5 of the largest.
void check_rms_norm_bf16(std::int64_t rows, std::int64_t dim, std::size_t offset,
                         std::uint32_t seed) {
  const auto n = std::size_t(rows * dim), d = std::size_t(dim), r = std::size_t(rows);
  const auto xf = muster::test::normal_draws(n + offset, seed);
  const auto w = muster::test::normal_draws(d, seed + 1),
             g = muster::test::normal_draws(n, seed + 2);
  std::vector<bf16> x(n + offset);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = to_bf16(xf[i]);
  std::vector<float> y(n), rstd(r);
  cpu::rms_norm_forward(x.data() + offset, w.data(), 1e-6f, rows, dim, y.data(), rstd.data());

  device_buffer<bf16> d_x(x), d_dx(n + offset);
  device_buffer<float> d_w(w), d_g(g), d_y(n), d_rstd(r), d_dw(std::vector<float>(d, 0.5f)),
      d_partials(std::size_t(cuda::rms_norm_backward_partials(rows, dim)));
  cuda::rms_norm_forward(d_x.ptr + offset, d_w.ptr, 1e-6f, rows, dim, d_y.ptr, d_rstd.ptr, nullptr);
  cuda::rms_norm_backward(d_x.ptr + offset, d_w.ptr, d_rstd.ptr, d_g.ptr, rows, dim,
                          d_dx.ptr + offset, d_dw.ptr, d_partials.ptr, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto s = d_rstd.host(), got_y = d_y.host(), got_dw = d_dw.host();
  const auto got_dx = d_dx.host();
  std::string rstd_report, dw_report;
  const double rstd_err = compare(s, rstd, 1e-5, rstd_report);
  std::vector<double> want_dw(d, 0.5), want_dx(n);
  std::size_t y_wrong = 0;
  double dx_scale = 1e-30;
  for (std::size_t row = 0; row < r; ++row) {
    double dot = 0;
    for (std::size_t j = 0; j < d; ++j) {
      const auto i = row * d + j;
      const float xv = to_float(x[offset + i]), normed = to_float(to_bf16(xv * s[row]));
      y_wrong += got_y[i] != w[j] * normed ? 1 : 0;
      want_dw[j] += double(g[i]) * normed;
      dot += double(g[i]) * w[j] * xv;
    }
    const double mean = s[row] * dot / double(dim);
    for (std::size_t j = 0; j < d; ++j) {
      const auto i = row * d + j;
      const double xv = to_float(x[offset + i]);
      want_dx[i] = s[row] * (double(g[i]) * w[j] - xv * s[row] * mean);
      dx_scale = std::max(dx_scale, std::abs(want_dx[i]));
    }
  }
  std::size_t dx_wrong = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double got = to_float(got_dx[offset + i]);
    if (std::abs(got - want_dx[i]) > std::ldexp(std::abs(want_dx[i]), -8) + 1e-5 * dx_scale &&
        dx_wrong++ == 0)
      first = i;
  }
  const double dw_err =
      compare(std::vector<double>(got_dw.begin(), got_dw.end()), want_dw, 1e-5, dw_report);
  INFO("bf16 rows; rstd:\n"
       << rstd_report << "y: " << y_wrong << " of " << n << " differ from w * bf16(x * rstd)\n"
       << "grad_x: " << dx_wrong << " past half a bf16 step; the first at " << first << ": cuda "
       << (n ? to_float(got_dx[offset + first]) : 0.0f) << " fp64 " << (n ? want_dx[first] : 0.0)
       << "\ngrad_w:\n"
       << dw_report);
  CHECK(rstd_err <= 1e-5);
  CHECK(y_wrong == 0);
  CHECK(dx_wrong == 0);
  CHECK(dw_err <= 1e-5);
}

}  // namespace

TEST_CASE("the RMSNorm CUDA kernels match the CPU reference", "[kernels][rms_norm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 3;
  for (const auto& [rows, dim] : std::vector<std::tuple<std::int64_t, std::int64_t>>{
           {1, 2},  // not 1 wide: there grad_x is all cancellation, rounding noise either side
           {3, 7},
           {5, 128},
           {33, 1000},
           {8192, 1024},  // the ~1B bench model's norms
           {70001, 64},   // more rows than 512 blocks of 64: longer blocks, an empty last one
           {129, 4099},
           {17, 16384}})
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // 1: off 16 bytes
      INFO("rows " << rows << " dim " << dim << " offset " << offset);
      check_rms_norm(rows, dim, offset, seed);
      check_rms_norm_bf16(rows, dim, offset, seed + 1);
      seed += 3;
    }
  INFO("rows of 1e4 and 1e-4");
  check_rms_norm(33, 1000, 0, seed, /*extremes=*/true);
}

TEST_CASE("the RMSNorm CUDA kernels take no rows", "[kernels][rms_norm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  device_buffer<float> d_dw(std::vector<float>{1.0f, 2.0f});
  const float* none = nullptr;
  cuda::rms_norm_forward(none, nullptr, 1e-6f, 0, 2, nullptr, nullptr, nullptr);
  cuda::rms_norm_backward(none, nullptr, nullptr, nullptr, 0, 2, nullptr, d_dw.ptr, nullptr,
                          nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(d_dw.host() == std::vector<float>{1.0f, 2.0f});
}

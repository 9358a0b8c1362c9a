// The optimizer's CUDA kernels against the CPU reference (kernels/cpu/optimizer.cpp): AdamW over
// a few steps on small, odd and large sizes, aligned (the float4 path) and not, with and without
// the decay mask; the sum of squares against the CPU's fp64 sum, and the same bits twice.
// Without a CUDA device: "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "muster/kernels/optimizer.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;
using muster::test::compare;
using muster::test::device_buffer;

TEST_CASE("the optimizer's CUDA kernels match the CPU reference", "[kernels][optimizer][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 91;
  for (const std::int64_t n : {1, 3, 4, 4099, 1 << 22})
    for (const std::int64_t offset : {0, 1})  // 1: pointers off 16-byte alignment
      for (const bool masked : {false, true}) {
        INFO("n " << n << " offset " << offset << " decay mask " << masked);
        const auto size = std::size_t(n + offset);
        auto param = muster::test::normal_draws(size, seed++);
        auto exp_avg = std::vector<float>(size, 0.0f), exp_avg_sq = exp_avg;
        auto mask = std::vector<float>(size);
        for (std::size_t i = 0; i < size; ++i) mask[i] = float(i % 3 != 0);
        device_buffer<float> d_param(param), d_m(exp_avg), d_v(exp_avg_sq), d_mask(mask);
        adamw_scalars s;
        s.lr = 1e-3;
        s.weight_decay = 0.1;
        for (std::int64_t step = 1; step <= 3; ++step) {
          s.step = step;
          const auto grad = muster::test::normal_draws(size, seed++);
          device_buffer<float> d_grad(grad);
          cpu::adamw_update(s, param.data() + offset, grad.data() + offset, exp_avg.data() + offset,
                            exp_avg_sq.data() + offset, masked ? mask.data() + offset : nullptr, n);
          cuda::adamw_update(s, d_param.ptr + offset, d_grad.ptr + offset, d_m.ptr + offset,
                             d_v.ptr + offset, masked ? d_mask.ptr + offset : nullptr, n, nullptr);
        }
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        for (const auto& [what, got, want] : {std::tuple{"param", d_param.host(), param},
                                              std::tuple{"exp_avg", d_m.host(), exp_avg},
                                              std::tuple{"exp_avg_sq", d_v.host(), exp_avg_sq}}) {
          std::string report;
          const double err = compare(got, want, 1e-5, report);
          INFO(what << ": normalised error " << err << "\n" << report);
          CHECK(err <= 1e-5);
        }
      }
}

TEST_CASE("the CUDA sum of squares matches the CPU's and repeats its bits",
          "[kernels][optimizer][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 97;
  for (const std::int64_t n : {0, 1, 257, 1 << 22, (1 << 24) + 5}) {
    INFO("n " << n);
    auto x = muster::test::normal_draws(std::size_t(n), seed++);
    if (n > 2) x[1] = 1e4f;  // one large value among small ones
    device_buffer<float> d_x(x);
    device_buffer<double> scratch{std::size_t(kSumOfSquaresScratch)};
    const double want = cpu::sum_of_squares(x.data(), n);
    double got[2];
    for (double& g : got) {
      cuda::sum_of_squares(d_x.ptr, n, scratch.ptr, nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      g = scratch.host()[std::size_t(kSumOfSquaresScratch - 1)];
    }
    CHECK(std::abs(got[0] - want) <= 1e-12 * std::max(1.0, want));
    CHECK(std::memcmp(&got[0], &got[1], sizeof(double)) == 0);
  }
}

// The SwiGLU CUDA kernels against the CPU reference (kernels/cpu/swiglu.cpp), on small, odd and
// large sizes, aligned (the float4 path) and not (the scalar path), with values out to where
// exp overflows; fp32 within a normalised bound, bf16 within one bf16 ulp. Without a CUDA
// device: "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <vector>

#include "muster/kernels/swiglu.hpp"
#include "tests/kernels/bf16_values.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;
using muster::test::compare;
using muster::test::device_buffer;

TEST_CASE("the SwiGLU CUDA kernels match the CPU reference", "[kernels][swiglu][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 41;
  for (const std::int64_t n : {1, 3, 4, 4099, 1 << 22})
    for (const std::int64_t offset : {0, 1}) {  // 1: pointers off 16-byte alignment
      INFO("n " << n << " offset " << offset);
      auto gate = muster::test::normal_draws(std::size_t(n + offset), seed++);
      for (auto& v : gate) v *= 4;
      if (n > 8) gate[std::size_t(offset)] = 100.0f, gate[std::size_t(offset + 1)] = -100.0f;
      const auto up = muster::test::normal_draws(std::size_t(n + offset), seed++);
      const auto grad = muster::test::normal_draws(std::size_t(n + offset), seed++);
      const auto m = std::size_t(n);
      std::vector<float> y(m), da(m), db(m);
      cpu::swiglu_forward(gate.data() + offset, up.data() + offset, y.data(), n);
      cpu::swiglu_backward(gate.data() + offset, up.data() + offset, grad.data() + offset,
                           da.data(), db.data(), n);
      device_buffer<float> d_gate(gate), d_up(up), d_grad(grad), d_y(m + 1), d_da(m + 1),
          d_db(m + 1);
      cuda::swiglu_forward(d_gate.ptr + offset, d_up.ptr + offset, d_y.ptr + offset, n, nullptr);
      cuda::swiglu_backward(d_gate.ptr + offset, d_up.ptr + offset, d_grad.ptr + offset,
                            d_da.ptr + offset, d_db.ptr + offset, n, nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      auto slice = [&](const device_buffer<float>& b) {
        auto all = b.host();
        return std::vector<float>(all.begin() + offset, all.begin() + offset + n);
      };
      std::string y_report, da_report, db_report;
      const double y_err = compare(slice(d_y), y, 1e-5, y_report);
      const double da_err = compare(slice(d_da), da, 1e-5, da_report);
      const double db_err = compare(slice(d_db), db, 1e-5, db_report);
      INFO("y: " << y_report << "\nda: " << da_report << "\ndb: " << db_report);
      CHECK(y_err <= 1e-5);
      CHECK(da_err <= 1e-5);
      CHECK(db_err <= 1e-5);

      // bf16: 8 elements a thread on the aligned path (offset 0), one by one otherwise
      const auto gate16 = muster::test::to_bf16(gate), up16 = muster::test::to_bf16(up),
                 grad16 = muster::test::to_bf16(grad);
      std::vector<bf16> y16(m), da16(m), db16(m);
      cpu::swiglu_forward(gate16.data() + offset, up16.data() + offset, y16.data(), n);
      cpu::swiglu_backward(gate16.data() + offset, up16.data() + offset, grad16.data() + offset,
                           da16.data(), db16.data(), n);
      device_buffer<bf16> d_gate16(gate16), d_up16(up16), d_grad16(grad16), d_y16(m + 8),
          d_da16(m + 8), d_db16(m + 8);
      cuda::swiglu_forward(d_gate16.ptr + offset, d_up16.ptr + offset, d_y16.ptr + offset, n,
                           nullptr);
      cuda::swiglu_backward(d_gate16.ptr + offset, d_up16.ptr + offset, d_grad16.ptr + offset,
                            d_da16.ptr + offset, d_db16.ptr + offset, n, nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      auto slice16 = [&](const device_buffer<bf16>& b) {
        auto all = b.host();
        return std::vector<bf16>(all.begin() + offset, all.begin() + offset + n);
      };
      std::string y16_report, da16_report, db16_report;
      const int y16_ulps = muster::test::worst_ulps(slice16(d_y16), y16, 1, y16_report);
      const int da16_ulps = muster::test::worst_ulps(slice16(d_da16), da16, 1, da16_report);
      const int db16_ulps = muster::test::worst_ulps(slice16(d_db16), db16, 1, db16_report);
      INFO("bf16 y:\n" << y16_report << "da:\n" << da16_report << "db:\n" << db16_report);
      CHECK(y16_ulps <= 1);
      CHECK(da16_ulps <= 1);
      CHECK(db16_ulps <= 1);
    }
}

namespace {

// The packed-row kernels on the CPU and on the GPU over the same T values: each's output and
// gradient.
template <class T>
struct rows_run {
  std::vector<T> cpu_y, cpu_grad, gpu_y, gpu_grad;
};

template <class T>
rows_run<T> run_rows(const std::vector<T>& gate_up, const std::vector<T>& grad_out,
                     std::int64_t rows, std::int64_t width) {
  const auto n = grad_out.size();
  rows_run<T> r{std::vector<T>(n), std::vector<T>(2 * n), {}, {}};
  cpu::swiglu_rows_forward(gate_up.data(), r.cpu_y.data(), rows, width);
  cpu::swiglu_rows_backward(gate_up.data(), grad_out.data(), r.cpu_grad.data(), rows, width);
  device_buffer<T> d_gate_up(gate_up), d_grad_out(grad_out), d_y(n), d_grad(2 * n);
  cuda::swiglu_rows_forward(d_gate_up.ptr, d_y.ptr, rows, width, nullptr);
  cuda::swiglu_rows_backward(d_gate_up.ptr, d_grad_out.ptr, d_grad.ptr, rows, width, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  r.gpu_y = d_y.host();
  r.gpu_grad = d_grad.host();
  return r;
}

}  // namespace

// Packed rows (gate | up), widths a whole number of 16-byte packs a row (4 fp32, 8 bf16: the
// vector path with the row layout) and not: fp32 within the normalised bound, bf16 within one ulp.
TEST_CASE("the SwiGLU CUDA kernels over packed rows match the CPU reference",
          "[kernels][swiglu][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 91;
  for (const std::int64_t width : {1, 3, 8, 640, 1001})
    for (const std::int64_t rows : {1, 5, 3000}) {
      INFO("rows " << rows << " width " << width);
      const auto n = std::size_t(rows * width);
      auto gate_up = muster::test::normal_draws(2 * n, seed++);
      for (auto& v : gate_up) v *= 4;
      const auto grad = muster::test::normal_draws(n, seed++);
      const auto f32 = run_rows(gate_up, grad, rows, width);
      const auto b16 =
          run_rows(muster::test::to_bf16(gate_up), muster::test::to_bf16(grad), rows, width);
      std::string y_report, d_report, y16_report, d16_report;
      const double y_err = compare(f32.gpu_y, f32.cpu_y, 1e-5, y_report);
      const double d_err = compare(f32.gpu_grad, f32.cpu_grad, 1e-5, d_report);
      const int y16_ulps = muster::test::worst_ulps(b16.gpu_y, b16.cpu_y, 1, y16_report);
      const int d16_ulps = muster::test::worst_ulps(b16.gpu_grad, b16.cpu_grad, 1, d16_report);
      INFO("y:\n"
           << y_report << "grad:\n"
           << d_report << "bf16 y:\n"
           << y16_report << "bf16 grad:\n"
           << d16_report);
      CHECK(y_err <= 1e-5);
      CHECK(d_err <= 1e-5);
      CHECK(y16_ulps <= 1);
      CHECK(d16_ulps <= 1);
    }
}

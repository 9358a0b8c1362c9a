// The grouped GEMM on the GPU (cuBLAS, both methods) against products computed plainly in double
// on the same inputs: fp32 and bf16, every transpose combination, groups of 0 to 4096 rows, k = 0,
// strides wider than the rows, beta 0 and 1. Without a CUDA device: "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/grouped_gemm_cases.hpp"

using namespace muster::kernels;
using muster::test::device_buffer;

namespace {

// bf16 as stored (round to nearest even), and back.
std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The matrices on the device in `dtype`; the host copies rounded the same way, so the double
// reference sees what the GPU sees.
struct device_group {
  std::vector<float> a, b, c;
  device_buffer<float> da32, db32, dc32;
  device_buffer<std::uint16_t> da16, db16, dc16;
  device_group(muster::test::gemm_case_group& g, gemm_dtype dtype)
      : da32(dtype == gemm_dtype::f32 ? g.a : std::vector<float>{}),
        db32(dtype == gemm_dtype::f32 ? g.b : std::vector<float>{}),
        dc32(dtype == gemm_dtype::f32 ? g.c : std::vector<float>{}),
        da16(rounded(g.a, dtype)),
        db16(rounded(g.b, dtype)),
        dc16(rounded(g.c, dtype)) {}
  static std::vector<std::uint16_t> rounded(std::vector<float>& v, gemm_dtype dtype) {
    if (dtype == gemm_dtype::f32) return {};
    std::vector<std::uint16_t> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = from_bf16(out[i] = to_bf16(v[i]));
    return out;
  }
  std::vector<float> result(gemm_dtype dtype) const {
    if (dtype == gemm_dtype::f32) return dc32.host();
    std::vector<float> out;
    for (auto h : dc16.host()) out.push_back(from_bf16(h));
    return out;
  }
};

}  // namespace

TEST_CASE("the grouped GEMM on the GPU matches plain products", "[kernels][grouped_gemm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::vector<cuda::grouped_gemm_method> methods{cuda::grouped_gemm_method::per_group,
                                                 cuda::grouped_gemm_method::automatic};
  if (cuda::grouped_batched_available())
    methods.push_back(cuda::grouped_gemm_method::grouped_batched);
  else
    WARN("this cuBLAS has no cublasGemmGroupedBatchedEx: that method is not tested");
  std::uint32_t seed = 71;
  for (const auto dtype : {gemm_dtype::f32, gemm_dtype::bf16})
    for (const auto method : methods)
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true})
          for (const float beta : {0.0f, 1.0f})
            for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                     {1, 1}, {7, 5}, {256, 128}, {33, 0}}) {
              INFO("bf16 " << (dtype == gemm_dtype::bf16) << " method " << int(method)
                           << " trans_a " << trans_a << " trans_b " << trans_b << " beta " << beta
                           << " n " << n << " k " << k);
              auto cases =
                  muster::test::gemm_case({0, 1, 13, 4096, 2}, n, k, trans_a, trans_b, 3, seed++);
              std::vector<device_group> on_device;
              on_device.reserve(cases.size());
              std::vector<gemm_group> groups;
              for (auto& c : cases) {
                auto& d = on_device.emplace_back(c, dtype);
                const bool f32 = dtype == gemm_dtype::f32;
                groups.push_back({c.m, c.n, c.k, f32 ? (void*)d.da32.ptr : (void*)d.da16.ptr, c.lda,
                                  f32 ? (void*)d.db32.ptr : (void*)d.db16.ptr, c.ldb,
                                  f32 ? (void*)d.dc32.ptr : (void*)d.dc16.ptr, c.ldc});
              }
              grouped_gemm_args args;
              args.trans_a = trans_a;
              args.trans_b = trans_b;
              args.beta = beta;
              args.dtype = dtype;
              cuda::grouped_gemm(groups.data(), int(groups.size()), args, nullptr, method);
              REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
              for (std::size_t g = 0; g < cases.size(); ++g) {
                const auto want = muster::test::gemm_reference(cases[g], trans_a, trans_b, beta);
                const auto got = on_device[g].result(dtype);
                std::vector<double> got_d(got.begin(), got.end());
                std::string report;
                // fp32: cuBLAS may take TF32-free fp32 paths of another summation order; bf16:
                // the output's rounding (2^-8) dominates
                const double bound = dtype == gemm_dtype::f32 ? 1e-5 : 8e-3;
                const double worst = muster::test::compare(got_d, want, bound, report);
                INFO("group " << g << " worst " << worst << "\n" << report);
                CHECK(worst <= bound);
              }
            }
}

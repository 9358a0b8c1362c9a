// The grouped GEMM on the GPU (cuBLAS, every method; sm90 here only where it falls back, its own
// kernel has test_grouped_gemm_sm90_cuda) against products computed plainly in double on the
// same inputs: fp32 and bf16, every transpose combination, groups of 0 to 4096 rows, k = 0,
// strides wider than the rows, beta 0 and 1; and groups laid out as the experts' are, which
// split_batched and automatic run as uniform batches and a rest, also where their row counts put
// groups off 16-byte boundaries (one cublasGemmEx a group then). Without a CUDA device:
// "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "muster/kernels/bf16.hpp"
#include "muster/kernels/grouped_gemm.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/grouped_gemm_cases.hpp"

using namespace muster::kernels;
using muster::test::device_buffer;

namespace {

// bf16 as stored (round to nearest even), and back.
std::uint16_t to_bf16(float f) {
  return muster::kernels::to_bf16(f).bits;
}
float from_bf16(std::uint16_t h) {
  return muster::kernels::to_float(muster::kernels::bf16{h});
}

// One host array of matrices on the device, in `dtype` (the host values rounded the same
// way, so the double reference sees what the GPU sees), and where a host pointer into it lands.
struct device_array {
  std::vector<float>& host;
  gemm_dtype dtype;
  device_buffer<float> f32;
  device_buffer<std::uint16_t> bf16;
  device_array(std::vector<float>& h, gemm_dtype t)
      : host(h),
        dtype(t),
        f32(t == gemm_dtype::f32 ? h : std::vector<float>{}),
        bf16(rounded(h, t)) {}
  static std::vector<std::uint16_t> rounded(std::vector<float>& v, gemm_dtype dtype) {
    if (dtype == gemm_dtype::f32) return {};
    std::vector<std::uint16_t> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = from_bf16(out[i] = to_bf16(v[i]));
    return out;
  }
  void* at(const void* p) const {
    const auto i = static_cast<const float*>(p) - host.data();
    return dtype == gemm_dtype::f32 ? static_cast<void*>(f32.ptr + i)
                                    : static_cast<void*>(bf16.ptr + i);
  }
  std::vector<float> result() const {
    if (dtype == gemm_dtype::f32) return f32.host();
    std::vector<float> out;
    for (auto h : bf16.host()) out.push_back(from_bf16(h));
    return out;
  }
};

// A case group's matrices on the device.
struct device_group {
  device_array a, b, c;
  device_group(muster::test::gemm_case_group& g, gemm_dtype dtype)
      : a(g.a, dtype), b(g.b, dtype), c(g.c, dtype) {}
};

}  // namespace

TEST_CASE("the grouped GEMM on the GPU matches plain products", "[kernels][grouped_gemm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  // sm90 where the groups are not row-grouped (all of these): automatic again
  std::vector<cuda::grouped_gemm_method> methods{
      cuda::grouped_gemm_method::per_group, cuda::grouped_gemm_method::automatic,
      cuda::grouped_gemm_method::split_batched, cuda::grouped_gemm_method::sm90};
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
                groups.push_back({c.m, c.n, c.k, d.a.at(c.a.data()), c.lda, d.b.at(c.b.data()),
                                  c.ldb, d.c.at(c.c.data()), c.ldc});
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
                const auto got = on_device[g].c.result();
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

TEST_CASE("the grouped GEMM on the GPU splits the experts' groups into batches correctly",
          "[kernels][grouped_gemm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 301;
  // ~1024 rows (or reduction) an expert and one of none, as the experts' are; then sizes whose
  // sums put groups off 16-byte boundaries, which every method must run one product a group
  // (cuBLAS's pointer-array kernels stop at a misaligned address)
  const std::vector<std::vector<std::int64_t>> size_sets{
      {1024, 960, 0, 1088, 1024, 896, 1152, 1000, 1030}, {1023, 961, 0, 1089, 1, 1000, 1031}};
  std::vector<cuda::grouped_gemm_method> methods{cuda::grouped_gemm_method::split_batched,
                                                 cuda::grouped_gemm_method::automatic,
                                                 cuda::grouped_gemm_method::sm90};
  if (cuda::grouped_batched_available())
    methods.push_back(cuda::grouped_gemm_method::grouped_batched);
  int misaligned = 0;
  for (const auto& sizes : size_sets)
    for (const auto dtype : {gemm_dtype::f32, gemm_dtype::bf16})
      for (const auto method : methods)
        for (const bool along_k : {false, true})
          for (const bool trans_a : {false, true})
            for (const bool trans_b : {false, true})
              for (const float beta : {0.0f, 1.0f}) {
                INFO("sizes from " << sizes[0] << " bf16 " << (dtype == gemm_dtype::bf16)
                                   << " method " << int(method) << " along k " << along_k
                                   << " trans_a " << trans_a << " trans_b " << trans_b << " beta "
                                   << beta);
                grouped_gemm_args args;
                args.trans_a = trans_a;
                args.trans_b = trans_b;
                args.beta = beta;
                args.dtype = dtype;
                muster::test::expert_layout l(sizes, along_k, 96, 80, 64, args, seed);
                seed += 3;
                device_array a(l.a, dtype), b(l.b, dtype), c(l.c, dtype);
                const auto want = muster::test::plain_products(l, args);
                std::vector<gemm_group> groups;
                for (const auto& g : l.groups)
                  groups.push_back(
                      {g.m, g.n, g.k, a.at(g.a), g.lda, b.at(g.b), g.ldb, c.at(g.c), g.ldc});
                misaligned += !pointers_aligned(groups.data(), int(groups.size()));
                cuda::grouped_gemm(groups.data(), int(groups.size()), args, nullptr, method);
                REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
                const auto result = c.result();
                const double bound = dtype == gemm_dtype::f32 ? 1e-5 : 8e-3;
                for (std::size_t g = 0; g < l.groups.size(); ++g) {
                  const auto& x = l.groups[g];
                  const auto first = static_cast<const float*>(x.c) - l.c.data();
                  std::vector<double> got;
                  for (std::int64_t i = 0; i < x.m; ++i)
                    for (std::int64_t j = 0; j < x.n; ++j)
                      got.push_back(result[std::size_t(first + i * x.ldc + j)]);
                  std::string report;
                  const double worst = muster::test::compare(got, want[g], bound, report);
                  INFO("group " << g << " worst " << worst << "\n" << report);
                  CHECK(worst <= bound);
                }
              }
  CHECK(misaligned > 0);  // the second sizes did put groups off the boundaries
}

// gather_transpose's CUDA kernel against the CPU's, bit for bit: 2- and 4-byte elements, the
// identity and padded maps, sizes below, at and past a 32 x 32 tile, and the ~1B bench's
// stacked gate and up gradient (32 experts, 32560 rows of 1280). Without a CUDA device:
// "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <cstdint>
#include <tuple>
#include <vector>

#include "muster/kernels/gather_transpose.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/gather_transpose_cases.hpp"

using namespace muster::kernels;
using muster::test::device_buffer;

namespace {

template <class T>
void check(const std::vector<std::int64_t>& counts, std::int64_t cols, std::int64_t common,
           bool identity) {
  const auto c = muster::test::make_gather_case<T>(counts, cols, common, identity);
  const auto &src = c.src, &map = c.map;
  const auto rows = c.rows, dst_cols = c.dst_cols;
  // dst's rows 3 apart from its last column, which stay as they were
  const gather_transpose_shape shape{rows, cols, dst_cols, int(sizeof(T)), dst_cols + 3};
  std::vector<T> want(std::size_t(cols * (dst_cols + 3)), T(0xAB));
  cpu::gather_transpose(src.data(), identity ? nullptr : map.data(), shape, want.data());
  device_buffer<T> d_src(src), d_dst(std::vector<T>(want.size(), T(0xAB)));
  device_buffer<std::int32_t> d_map(map);
  cuda::gather_transpose(d_src.ptr, identity ? nullptr : d_map.ptr, shape, d_dst.ptr, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto got = d_dst.host();
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && wrong++ == 0) first = i;
  INFO(wrong << " of " << want.size() << " elements differ; the first at " << first << " (row "
             << first / std::size_t(dst_cols + 3) << "): cuda " << (wrong ? got[first] : 0)
             << " cpu " << (wrong ? want[first] : 0));
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("the gather_transpose CUDA kernel matches the CPU's",
          "[kernels][gather_transpose][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::vector<std::int64_t> experts;  // the ~1B bench's: 32 experts of 768..1269 rows
  for (std::int64_t e = 0; e < 32; ++e) experts.push_back(768 + (e * 397) % 512);
  muster::test::each_gather_case({{experts, 1280}}, 1280, [](const auto&... args) {
    check<std::uint16_t>(args...);
    check<std::uint32_t>(args...);
  });
}

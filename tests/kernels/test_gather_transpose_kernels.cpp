// gather_transpose on the CPU against the plain reference: 2- and 4-byte elements, with the
// identity and with padded maps of the experts' wgrad, sizes below, at and past a 32-element
// tile; and its refusals.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "muster/kernels/gather_transpose.hpp"
#include "tests/kernels/gather_transpose_cases.hpp"

using namespace muster::kernels;
using muster::test::gathered_transpose;
using muster::test::padded_map;

namespace {

template <class T>
void check(const std::vector<std::int64_t>& counts, std::int64_t cols, std::int64_t common,
           bool identity) {
  const auto c = muster::test::make_gather_case<T>(counts, cols, common, identity);
  std::vector<T> dst(std::size_t(cols * c.dst_cols), T(0xAB));  // overwritten everywhere
  cpu::gather_transpose(c.src.data(), c.map_or_null(), {c.rows, cols, c.dst_cols, int(sizeof(T))},
                        dst.data());
  CHECK(dst == gathered_transpose(c.src, c.rows, cols, c.map));
}

}  // namespace

TEST_CASE("gather_transpose moves rows to padded columns as the reference does",
          "[kernels][gather_transpose]") {
  muster::test::each_gather_case({}, 128, [](const auto&... args) {
    check<std::uint16_t>(args...);
    check<std::uint32_t>(args...);
  });
}

TEST_CASE("gather_transpose writes ranges of columns into a wider dst, as threads split it",
          "[kernels][gather_transpose]") {
  const std::vector<std::int64_t> counts{13, 0, 40, 7};
  const std::int64_t rows = 60, cols = 37;
  const auto map = padded_map(counts, 8);
  const auto dst_cols = std::int64_t(map.size()), ld = dst_cols + 5;
  std::vector<std::uint16_t> src(std::size_t(rows * cols));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = muster::test::hashed<std::uint16_t>(i);
  std::vector<std::uint16_t> dst(std::size_t(cols * ld), 0xAB);
  for (const auto& [begin, end] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 17}, {17, 40}, {40, dst_cols}}) {
    const gather_transpose_shape part{rows, cols, end - begin, 2, ld};
    cpu::gather_transpose(src.data(), map.data() + begin, part, dst.data() + begin);
  }
  const auto want = gathered_transpose(src, rows, cols, map);
  for (std::int64_t c = 0; c < cols; ++c) {
    INFO("row " << c);
    for (std::int64_t j = 0; j < dst_cols; ++j)
      REQUIRE(dst[std::size_t(c * ld + j)] == want[std::size_t(c * dst_cols + j)]);
    for (std::int64_t j = dst_cols; j < ld; ++j) REQUIRE(dst[std::size_t(c * ld + j)] == 0xAB);
  }
}

TEST_CASE("gather_transpose refuses what it cannot move", "[kernels][gather_transpose]") {
  std::vector<std::uint32_t> src(12), dst(24);
  const std::vector<std::int32_t> map{0, 1, 2, 3, -1, 5};
  // no map, but more columns than rows
  CHECK_THROWS_AS(cpu::gather_transpose(src.data(), nullptr, {4, 3, 6, 4}, dst.data()),
                  std::invalid_argument);
  // dst's rows closer than its columns
  CHECK_THROWS_AS(cpu::gather_transpose(src.data(), map.data(), {6, 2, 6, 4, 5}, dst.data()),
                  std::invalid_argument);
  // 8-byte elements
  CHECK_THROWS_AS(cpu::gather_transpose(src.data(), map.data(), {4, 3, 6, 8}, dst.data()),
                  std::invalid_argument);
  // a map entry past the rows (5 of 4)
  CHECK_THROWS_WITH(cpu::gather_transpose(src.data(), map.data(), {4, 3, 6, 4}, dst.data()),
                    Catch::Contains("map[5] = 5"));
  CHECK_THROWS_AS(cpu::gather_transpose(src.data(), map.data(), {-1, 3, 6, 4}, dst.data()),
                  std::invalid_argument);
}

// Shared by the gather_transpose tests: a map of dst's columns to src's rows as the experts'
// wgrad makes one (each group's rows to a padded block, -1 after them), hashed sources, the
// plain reference, and the cases both tests take.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

namespace muster::test {

// Groups of `counts` rows, each group's block `align`-rounded (or `common` long where > 0).
inline std::vector<std::int32_t> padded_map(const std::vector<std::int64_t>& counts,
                                            std::int64_t align, std::int64_t common = 0) {
  std::vector<std::int32_t> map;
  std::int32_t row = 0;
  for (const auto c : counts) {
    const auto block = common > 0 && c > 0 ? common : (c + align - 1) / align * align;
    for (std::int64_t i = 0; i < block; ++i) map.push_back(i < c ? row++ : -1);
  }
  return map;
}

// Element i of a source: bits that differ from their neighbours' and rows' (no pattern a row
// apart), never zero, so a padding zero or a misplaced row shows.
template <class T>
T hashed(std::size_t i) {
  const auto h = static_cast<std::uint32_t>((i + 1) * 2654435761u);
  const auto v = static_cast<T>(sizeof(T) == 2 ? h >> 16 : h);
  return v == T{0} ? T{1} : v;
}

// dst[c][j] = src[map[j]][c], or zero bits; map empty: the identity.
template <class T>
std::vector<T> gathered_transpose(const std::vector<T>& src, std::int64_t rows, std::int64_t cols,
                                  const std::vector<std::int32_t>& map) {
  const auto dst_cols = map.empty() ? rows : std::int64_t(map.size());
  std::vector<T> dst(std::size_t(cols * dst_cols));
  for (std::int64_t j = 0; j < dst_cols; ++j) {
    const std::int64_t r = map.empty() ? j : map[std::size_t(j)];
    for (std::int64_t c = 0; c < cols; ++c)
      dst[std::size_t(c * dst_cols + j)] = r < 0 ? T{0} : src[std::size_t(r * cols + c)];
  }
  return dst;
}

// A source of rows (the groups' counts summed) of `cols` hashed elements, and dst's columns:
// each group's rows padded to 8 (or to `common`), or (identity) no map.
template <class T>
struct gather_case {
  std::int64_t rows = 0, cols = 0, dst_cols = 0;
  std::vector<std::int32_t> map;  // empty: none
  std::vector<T> src;
  const std::int32_t* map_or_null() const { return map.empty() ? nullptr : map.data(); }
};

template <class T>
gather_case<T> make_gather_case(const std::vector<std::int64_t>& counts, std::int64_t cols,
                                std::int64_t common, bool identity) {
  gather_case<T> c;
  for (auto n : counts) c.rows += n;
  c.cols = cols;
  if (!identity) c.map = padded_map(counts, 8, common);
  c.dst_cols = identity ? c.rows : std::int64_t(c.map.size());
  c.src.resize(std::size_t(c.rows * cols));
  for (std::size_t i = 0; i < c.src.size(); ++i) c.src[i] = hashed<T>(i);
  return c;
}

using group_case = std::tuple<std::vector<std::int64_t>, std::int64_t>;  // counts, cols

// Calls check(counts, cols, common, identity) for no groups, empty ones, one row, sizes below,
// at and past a 32-element tile, and `extra`: each padded to 8, padded to `common` (at least
// the largest count) and with no map.
template <class Check>
void each_gather_case(const std::vector<group_case>& extra, std::int64_t common, Check&& check) {
  std::vector<group_case> cases{{std::vector<std::int64_t>{}, 5},
                                {{0, 0}, 3},
                                {{1}, 1},
                                {{7}, 33},
                                {{0, 3, 8, 1, 13, 0}, 5},
                                {{40, 0, 31, 64, 1}, 32},
                                {{100, 57, 3}, 70}};
  cases.insert(cases.end(), extra.begin(), extra.end());
  for (const auto& [counts, cols] : cases)
    for (const std::int64_t padded_to : {std::int64_t{0}, common})
      for (const bool identity : {false, true}) {
        if (identity && padded_to > 0) continue;
        INFO(counts.size() << " groups, cols " << cols << ", common " << padded_to
                           << (identity ? ", no map" : ", padded"));
        check(counts, cols, padded_to, identity);
      }
}

}  // namespace muster::test

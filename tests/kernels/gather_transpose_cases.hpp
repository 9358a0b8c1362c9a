// Shared by the gather_transpose tests: a map of dst's columns to src's rows as the experts'
// wgrad makes one (each group's rows to a padded block, -1 after them), and the plain reference.
#pragma once

#include <cstdint>
#include <cstring>
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

}  // namespace muster::test

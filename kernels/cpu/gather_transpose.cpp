// Rows gathered and transposed on the CPU: see muster/kernels/gather_transpose.hpp. Tiles of
// 32 x 32 elements, so that a tile's source rows and destination rows both stay in cache.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "muster/kernels/gather_transpose.hpp"

namespace muster::kernels {

void check_gather_transpose(const gather_transpose_shape& s, const std::int32_t* map) {
  auto bad = [](const std::string& what) {
    throw std::invalid_argument("gather_transpose: " + what);
  };
  if (s.rows < 0 || s.cols < 0 || s.dst_cols < 0)
    bad("a negative size (rows " + std::to_string(s.rows) + ", cols " + std::to_string(s.cols) +
        ", dst_cols " + std::to_string(s.dst_cols) + ")");
  if (s.elem_bytes != 2 && s.elem_bytes != 4)
    bad("elements of " + std::to_string(s.elem_bytes) + " bytes; 2 or 4 are moved");
  if (map == nullptr && s.dst_cols != s.rows)
    bad("no map, and dst_cols " + std::to_string(s.dst_cols) + " is not rows " +
        std::to_string(s.rows));
  if (s.rows > INT32_MAX) bad("rows " + std::to_string(s.rows) + " beyond the map's int32");
  if (s.dst_ld != 0 && s.dst_ld < s.dst_cols)
    bad("dst_ld " + std::to_string(s.dst_ld) + " under dst_cols " + std::to_string(s.dst_cols));
}

namespace {

constexpr std::int64_t kTile = 32;

template <class T>
void transpose_tiles(const T* src, const std::int32_t* map, const gather_transpose_shape& s,
                     T* dst) {
  const auto ld = s.row_stride();
  for (std::int64_t j0 = 0; j0 < s.dst_cols; j0 += kTile) {
    const auto j1 = std::min(j0 + kTile, s.dst_cols);
    for (std::int64_t c0 = 0; c0 < s.cols; c0 += kTile) {
      const auto c1 = std::min(c0 + kTile, s.cols);
      for (std::int64_t j = j0; j < j1; ++j) {
        const std::int64_t r = map ? map[j] : j;
        T* column = dst + j;
        if (r < 0) {
          for (std::int64_t c = c0; c < c1; ++c) column[c * ld] = T{0};
          continue;
        }
        const T* row = src + r * s.cols;
        for (std::int64_t c = c0; c < c1; ++c) column[c * ld] = row[c];
      }
    }
  }
}

}  // namespace

namespace cpu {

void gather_transpose(const void* src, const std::int32_t* map, const gather_transpose_shape& s,
                      void* dst) {
  check_gather_transpose(s, map);
  if (map)
    for (std::int64_t j = 0; j < s.dst_cols; ++j)
      if (map[j] >= s.rows)
        throw std::invalid_argument("gather_transpose: map[" + std::to_string(j) +
                                    "] = " + std::to_string(map[j]) + " is not below rows " +
                                    std::to_string(s.rows));
  if (s.elem_bytes == 2)
    transpose_tiles(static_cast<const std::uint16_t*>(src), map, s,
                    static_cast<std::uint16_t*>(dst));
  else
    transpose_tiles(static_cast<const std::uint32_t*>(src), map, s,
                    static_cast<std::uint32_t*>(dst));
}

}  // namespace cpu
}  // namespace muster::kernels

// Rows gathered and transposed on the GPU: see muster/kernels/gather_transpose.hpp. A block
// moves a tile of 32 source rows (map entries) x 32 columns through shared memory: it reads
// each row's 32 consecutive elements with one warp and writes 32 consecutive elements of each
// destination row with one warp. A tile's row in shared memory is an odd number of 4-byte words
// long (34 two-byte or 33 four-byte elements), so that a warp reading down a tile's column
// meets 32 different banks.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/gather_transpose.hpp"

namespace muster::kernels::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kPasses = 8;  // threadIdx.y: the block is 32 x 8 threads, 4 tile rows each
constexpr std::int64_t kMaxGridY = 65535;

template <class T>
__global__ void gather_transpose_kernel(const T* src, const std::int32_t* map, std::int64_t cols,
                                        std::int64_t dst_cols, std::int64_t dst_ld, T* dst) {
  constexpr int kStride = kTile + 4 / static_cast<int>(sizeof(T));
  __shared__ T tile[kTile * kStride];
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kTile;  // dst's columns
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.y) * kTile;  // src's columns
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int i = ty; i < kTile; i += kPasses) {
    const std::int64_t j = j0 + i, c = c0 + tx;
    T v = 0;
    if (j < dst_cols && c < cols) {
      const std::int64_t r = map ? map[j] : j;
      if (r >= 0) v = src[r * cols + c];
    }
    tile[i * kStride + tx] = v;
  }
  __syncthreads();
  for (int i = ty; i < kTile; i += kPasses) {
    const std::int64_t c = c0 + i, j = j0 + tx;
    if (c < cols && j < dst_cols) dst[c * dst_ld + j] = tile[tx * kStride + i];
  }
}

}  // namespace

void gather_transpose(const void* src, const std::int32_t* map, const gather_transpose_shape& s,
                      void* dst, void* stream) {
  check_gather_transpose(s, map);
  if (s.cols == 0 || s.dst_cols == 0) return;
  const std::int64_t grid_x = (s.dst_cols + kTile - 1) / kTile,
                     grid_y = (s.cols + kTile - 1) / kTile;
  if (grid_y > kMaxGridY)
    throw std::invalid_argument("gather_transpose: cols " + std::to_string(s.cols) +
                                " beyond the grid's " + std::to_string(kMaxGridY * kTile));
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)),
      block(kTile, kPasses);
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.elem_bytes == 2)
    gather_transpose_kernel<<<grid, block, 0, st>>>(static_cast<const std::uint16_t*>(src), map,
                                                    s.cols, s.dst_cols, s.row_stride(),
                                                    static_cast<std::uint16_t*>(dst));
  else
    gather_transpose_kernel<<<grid, block, 0, st>>>(static_cast<const std::uint32_t*>(src), map,
                                                    s.cols, s.dst_cols, s.row_stride(),
                                                    static_cast<std::uint32_t*>(dst));
  MUSTER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace muster::kernels::cuda

// muster's own grouped GEMM for Hopper: see kernels/cuda/grouped_gemm_sm90.hpp.
//
// A block is three warpgroups. The first is the producer: one thread walks the block's tiles
// and, for each 64-wide step of k, waits for a free stage, then has TMA copy the tile's A rows
// (128 x 64) and its B (BN x 64 of B^T as stored, or BN / 64 boxes of 64 rows of k by 64 of n
// of B as stored) into it, 128-byte swizzled, completing on the stage's `full` barrier. The two
// others are consumers, 64 of the tile's rows each: for each step they wait on `full`, run four
// wgmma k16 products from the stage into fp32 registers, wait for them and free the stage
// (`empty`); after the last step they store the rows and columns of their (64, BN) block that
// fall inside the group: rounded to bf16, or fp32 written or added to C (the wgrad into fp32
// gradients). Blocks are persistent (one an SM), taking tiles blockIdx.x, +
// gridDim.x, ...; tiles run group after group, a group's row blocks in order, each row block's
// column blocks in order, so the blocks at work at once share their B (one expert's weight) and
// each A row block in L2.
//
// Tiles read past their group's rows (the next group's, or zeros past the view's end) and past
// n (the next expert's weight rows, or zeros): those rows and columns of the product are never
// stored. Past k A's tensor map reads zeros, so they add nothing, whatever B holds there (with
// B stored (k, n), the next expert's first rows: finite weights, times zero); where groups start
// mid-row in A (the wgrad's blocks of dy^T columns), k is a multiple of the step, so no step
// reaches the next group's columns (as_row_views), and B's rows past its view (x's end, where
// the last experts' padded reductions reach) read as zeros. Each group runs its own k's steps:
// where the groups' k differ (the wgrad's reductions padded by expert) each is a multiple of
// the step, so none reads past its own.
#include "kernels/cuda/grouped_gemm_sm90.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/per_device.hpp"
#include "kernels/cuda/stream_upload.hpp"
#include "kernels/cuda/wgmma_bf16.cuh"

namespace muster::kernels::cuda {
namespace {

constexpr int kBlockM = 128;   // a tile's rows: two consumer warpgroups of 64
constexpr int kBlockK = 64;    // k a stage: one 128-byte swizzled row of bf16
constexpr int kConsumers = 2;  // warpgroups
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kSmemLimit = 227 * 1024;  // an sm_90 block's dynamic shared memory
constexpr int kAlign = 1024;            // a 128-byte swizzle pattern's period (8 rows)

// How the products go to C.
constexpr int kStoreBf16 = 0, kStoreF32 = 1, kAddF32 = 2;

// A group as the kernel reads it: its first tile, and where its rows start in each view.
struct tile_group {
  int tile_start;
  int a_row;
  int a_col;
  int b_row;
  int m;
  int k_steps;  // the group's reduction in steps of kBlockK
  long long c_row;
};

template <int BN>
struct tiles {
  static constexpr int kABytes = kBlockM * kBlockK * 2;
  static constexpr int kBBytes = BN * kBlockK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kBarrierBytes = 2 * 8;  // a stage's full and empty barriers
  static constexpr int kStages = (kSmemLimit - kAlign) / (kStageBytes + kBarrierBytes);
  static constexpr int kSmemBytes = kAlign + kStages * (kStageBytes + kBarrierBytes);
  static_assert(kABytes % kAlign == 0 && kBBytes % kAlign == 0, "stages keep the alignment");
  static_assert(kStages >= 3, "at least three stages in flight");
};

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(barrier)),
               "r"(arrivals));
}

__device__ __forceinline__ std::uint64_t nanoseconds() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until the barrier's phase of parity `parity` has completed. A wait of 10 s (no product
// takes that long: a fault in the pipeline's bookkeeping) says where it was and stops the
// kernel, which the host sees as a launch failure rather than a hang.
__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, int parity) {
  constexpr std::uint64_t kStuck = 10'000'000'000ull;
  std::uint32_t done = 0, tries = 0;
  std::uint64_t since = 0;
  do {
    if (++tries % 4096 == 0) {
      const auto now = nanoseconds();
      if (since == 0) {
        since = now;
      } else if (now - since > kStuck) {
        printf("grouped gemm (sm90): block %d thread %d waited 10 s on barrier %u for parity %d\n",
               int(blockIdx.x), int(threadIdx.x), smem_address(barrier), parity);
        __trap();
      }
    }
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_address(barrier)), "r"(parity)
        : "memory");
  } while (done == 0);
}

__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(barrier)) : "memory");
}

// The producer's arrival, telling the barrier `bytes` more are coming from TMA.
__device__ __forceinline__ void barrier_expect(std::uint64_t* barrier, int bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(barrier)),
      "r"(bytes)
      : "memory");
}

// TMA: the box of `map` at (column, row) into shared memory at `dst`, completing on `barrier`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, std::uint64_t* barrier,
                                         int column, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(column), "r"(row), "r"(smem_address(barrier))
      : "memory");
}

// A K-major operand's shared memory descriptor, 128-byte swizzle: rows of 128 bytes (64 bf16 of
// k) in groups of 8 rows (1024 bytes apart). Moving 16 of k is moving the start 32 bytes.
__device__ __forceinline__ std::uint64_t sw128_descriptor(const void* p) {
  const std::uint64_t address = smem_address(p);
  return ((address & 0x3FFFF) >> 4)          // start address
         | (std::uint64_t(16 >> 4) << 16)    // leading byte offset (unused with the swizzle)
         | (std::uint64_t(1024 >> 4) << 32)  // stride byte offset: 8 rows
         | (std::uint64_t(1) << 62);         // 128-byte swizzle
}

// B stored (k, n), MN-major (the dgrad's weight), in chunks of 64 columns: each chunk 64 rows of
// k by 128 bytes (64 bf16 of n), 128-byte swizzled, kChunkBytes apart. The descriptor's leading
// byte offset is the step from one chunk of n to the next, its stride byte offset the step from
// 8 rows of k to the next; moving 16 of k is moving the start 16 rows (2048 bytes).
constexpr int kChunkBytes = kBlockK * 128;

__device__ __forceinline__ std::uint64_t sw128_mn_descriptor(const void* p) {
  const std::uint64_t address = smem_address(p);
  return ((address & 0x3FFFF) >> 4)                 // start address
         | (std::uint64_t(kChunkBytes >> 4) << 16)  // leading byte offset: 64 of n
         | (std::uint64_t(1024 >> 4) << 32)         // stride byte offset: 8 rows of k
         | (std::uint64_t(1) << 62);                // 128-byte swizzle
}

// Keeps the compiler from moving the accumulators' reads and writes across the asynchronous
// products' fence, commit and wait.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Overlap: a consumer keeps one step's products in flight while it issues the next step's,
// freeing a stage one step later; else it waits for each step's before the next. BKMajor: B is
// a group's (n, k) block (the forward's weight, C = A B^T); else its (k, n) block (C = A B).
template <int BN, bool Overlap, bool BKMajor>
__global__ void __launch_bounds__(kThreads, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map, void* c, int c_mode,
                        long long ldc, int n, int n_tiles, const tile_group* groups, int num_groups,
                        int num_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using cfg = tiles<BN>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((kAlign - smem_address(smem_raw) % kAlign) % kAlign);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + cfg::kStages * cfg::kStageBytes);
  auto* empty = full + cfg::kStages;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < cfg::kStages; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], kConsumers * 4);  // each consumer warp's first lane
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // Producer and consumers walk the same tiles and steps, so their stage and phase agree.
  int stage = 0, phase = 0, g = 0;
  auto next_stage = [&] {
    if (++stage == cfg::kStages) {
      stage = 0;
      phase ^= 1;
    }
  };

  if (warpgroup == 0) {
    if (threadIdx.x != 0) return;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      while (g + 1 < num_groups && groups[g + 1].tile_start <= tile) ++g;
      const int local = tile - groups[g].tile_start;
      const int a_row = groups[g].a_row + (local / n_tiles) * kBlockM;
      const int n0 = (local % n_tiles) * BN;
      const int a_col = groups[g].a_col;
      const int b_row = groups[g].b_row;
      const int k_steps = groups[g].k_steps;
      for (int step = 0; step < k_steps; ++step) {
        // the stage's previous use freed (the first round passes: that phase counts as done)
        barrier_wait(&empty[stage], phase ^ 1);
        unsigned char* a_tile = smem + stage * cfg::kStageBytes;
        unsigned char* b_tile = a_tile + cfg::kABytes;
        barrier_expect(&full[stage], cfg::kStageBytes);
        tma_load(a_tile, &a_map, &full[stage], a_col + step * kBlockK, a_row);
        if constexpr (BKMajor) {
          tma_load(b_tile, &b_map, &full[stage], step * kBlockK, b_row + n0);
        } else {
#pragma unroll
          for (int chunk = 0; chunk < BN / 64; ++chunk)
            tma_load(b_tile + chunk * kChunkBytes, &b_map, &full[stage], n0 + chunk * 64,
                     b_row + step * kBlockK);
        }
        next_stage();
      }
    }
    return;
  }

  const int consumer = warpgroup - 1;
  const int t = threadIdx.x % 128;
  const int lane = threadIdx.x % 32;
  float acc[BN / 2];
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    while (g + 1 < num_groups && groups[g + 1].tile_start <= tile) ++g;
    const int local = tile - groups[g].tile_start;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    int in_flight = -1;  // Overlap: the stage whose products may still be running
    const int k_steps = groups[g].k_steps;
    for (int step = 0; step < k_steps; ++step) {
      barrier_wait(&full[stage], phase);
      const unsigned char* a_tile = smem + stage * cfg::kStageBytes + consumer * 64 * 128;
      const unsigned char* b_tile = smem + stage * cfg::kStageBytes + cfg::kABytes;
      fence_accumulators(acc);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk)
        if constexpr (BKMajor)
          sm90::wgmma_bf16<BN, 0, 0>::mma(acc, sw128_descriptor(a_tile + kk * 32),
                                          sw128_descriptor(b_tile + kk * 32), 1);
        else
          sm90::wgmma_bf16<BN, 0, 1>::mma(acc, sw128_descriptor(a_tile + kk * 32),
                                          sw128_mn_descriptor(b_tile + kk * 16 * 128), 1);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      if constexpr (Overlap) {
        // the step before has finished reading its stage
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (lane == 0 && in_flight >= 0) barrier_arrive(&empty[in_flight]);
        in_flight = stage;
      } else {
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        if (lane == 0) barrier_arrive(&empty[stage]);
      }
      next_stage();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_accumulators(acc);
    if (Overlap && lane == 0 && in_flight >= 0) barrier_arrive(&empty[in_flight]);
    // This thread's rows 16 * warp + lane / 4 (+ 8) and columns 2 * (lane % 4) (+ 1) of each
    // 8 (wgmma_bf16.cuh), stored where they fall inside the group and n.
    const int m = groups[g].m;
    const long long c_row = groups[g].c_row;
    const int row = (local / n_tiles) * kBlockM + consumer * 64 + (t / 32) * 16 + (t % 32) / 4;
    const int column = (local % n_tiles) * BN + 2 * (t % 4);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = column + 8 * j;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row + 8 * half;
        if (r >= m || col >= n) continue;
        const long long at = (c_row + r) * ldc + col;
        float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
        if (c_mode == kStoreBf16) {
          __nv_bfloat16* out = static_cast<__nv_bfloat16*>(c) + at;
          if (col + 1 < n)
            *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(x, y);
          else
            *out = __float2bfloat16_rn(x);
        } else {  // fp32: stored, or added to what is there
          float* out = static_cast<float*>(c) + at;
          if (col + 1 < n) {
            if (c_mode == kAddF32) {
              const float2 was = *reinterpret_cast<const float2*>(out);
              x += was.x;
              y += was.y;
            }
            *reinterpret_cast<float2*>(out) = make_float2(x, y);
          } else {
            *out = c_mode == kAddF32 ? *out + x : x;
          }
        }
      }
    }
  }
#else
  (void)a_map, (void)b_map, (void)c, (void)c_mode, (void)ldc, (void)n, (void)n_tiles;
  (void)groups, (void)num_groups, (void)num_tiles;
  __trap();
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const auto fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    MUSTER_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                       cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || f == nullptr)
      throw std::runtime_error(
          "grouped gemm (sm90): the CUDA driver has no cuTensorMapEncodeTiled (driver 12.0 or "
          "later has it)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 2-D view of `rows` rows of `cols` bf16 at row stride `ld`, read in boxes of 64 columns by
// `box_rows` rows, 128-byte swizzled; reads outside it give zeros.
CUtensorMap rows_map(const void* base, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     int box_rows, const char* which) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * 2};
  const cuuint32_t box[2] = {cuuint32_t(kBlockK), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status = encode_tiled()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS)
    throw std::runtime_error("grouped gemm (sm90): cuTensorMapEncodeTiled refused " +
                             std::string(which) + " (" + std::to_string(rows) + " x " +
                             std::to_string(cols) + ", stride " + std::to_string(ld) +
                             "): CUresult " + std::to_string(int(status)));
  return map;
}

int sm_count() {
  static per_device<int> counts;
  return counts.get([](int device) {
    int count = 0;
    MUSTER_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  });
}

template <int BN, bool Overlap, bool BKMajor>
void launch(const row_views& v, cudaStream_t stream) {
  using cfg = tiles<BN>;
  // the kernel's shared memory over the default 48 KiB: an attribute of each device's
  static per_device<bool> sized;
  sized.get([](int) {
    MUSTER_CUDA_CHECK(cudaFuncSetAttribute(grouped_gemm_kernel<BN, Overlap, BKMajor>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           cfg::kSmemBytes));
    return true;
  });
  const int n_tiles = int((v.n + BN - 1) / BN);
  std::vector<tile_group> table;
  long long num_tiles = 0;
  for (const auto& g : v.groups) {
    table.push_back({int(num_tiles), int(g.a_row), int(g.a_col), int(g.b_row), int(g.m),
                     int((g.k + kBlockK - 1) / kBlockK), g.c_row});
    num_tiles += (g.m + kBlockM - 1) / kBlockM * n_tiles;
  }
  if (num_tiles > INT32_MAX)
    throw std::runtime_error("grouped gemm (sm90): " + std::to_string(num_tiles) +
                             " tiles, over the kernel's int range");
  const auto a_map = rows_map(v.a, v.a_rows, v.a_cols, v.lda, kBlockM, "A");
  // B: boxes of 64 of k by BN rows of n (B^T stored), or of 64 of n by 64 rows of k (B stored)
  const auto b_map = BKMajor ? rows_map(v.b, v.b_rows, v.k, v.ldb, BN, "B")
                             : rows_map(v.b, v.b_rows, v.n, v.ldb, kBlockK, "B");
  const int blocks = int(std::min<long long>(num_tiles, sm_count()));
  with_uploaded(table.data(), table.size() * sizeof(tile_group), stream, [&](const void* d) {
    grouped_gemm_kernel<BN, Overlap, BKMajor><<<blocks, kThreads, cfg::kSmemBytes, stream>>>(
        a_map, b_map, v.c,
        !v.c_f32         ? kStoreBf16
        : v.c_accumulate ? kAddF32
                         : kStoreF32,
        v.ldc, int(v.n), n_tiles, static_cast<const tile_group*>(d), int(table.size()),
        int(num_tiles));
    MUSTER_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

bool sm90_device() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

void grouped_gemm_sm90(const row_views& views, cudaStream_t stream, const sm90_options& options) {
  if (views.groups.empty()) return;
  // 256 columns a tile where that covers n with no more columns than 128 would
  const auto covered = [&](std::int64_t bn) { return (views.n + bn - 1) / bn * bn; };
  const bool wide = options.tile_n == 0 ? covered(256) <= covered(128) : options.tile_n == 256;
  using run = void (*)(const row_views&, cudaStream_t);
  // [wide][overlap][B K-major]
  static constexpr run kRuns[2][2][2] = {{{launch<128, false, false>, launch<128, false, true>},
                                          {launch<128, true, false>, launch<128, true, true>}},
                                         {{launch<256, false, false>, launch<256, false, true>},
                                          {launch<256, true, false>, launch<256, true, true>}}};
  kRuns[wide][options.overlap][views.b_k_major](views, stream);
}

}  // namespace muster::kernels::cuda

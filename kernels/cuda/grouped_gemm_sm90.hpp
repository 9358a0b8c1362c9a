// muster's own grouped GEMM for Hopper (H100/H200, sm_90a): TMA loads into a ring of shared
// memory stages, warpgroup MMA (wgmma) from there, one producer warpgroup and two consumer
// warpgroups a block, persistent blocks walking every group's tiles. It runs the row-grouped
// form (muster/kernels/grouped_gemm_rows.hpp: the experts' forward C = A B^T and dgrad C = A B,
// in bf16 with fp32 sums), where cuBLAS has only an sm_80 grouped kernel and batches of one
// shape. Built
// when CMAKE_CUDA_ARCHITECTURES has 90 (MUSTER_HAVE_SM90_GEMM); cuda::grouped_gemm runs it for
// grouped_gemm_method::sm90.
#pragma once

#include <cuda_runtime.h>

#include "muster/kernels/grouped_gemm_rows.hpp"

namespace muster::kernels::cuda {

// Whether the current device is compute capability 9.0, which the kernel is built for.
bool sm90_device();

struct sm90_options {
  // columns a tile: 128 or 256, or 0: 256 where that covers n in no more columns than 128
  // would (check_gemm_groups checks grouped_gemm_args::sm90_tile_n, which this is)
  int tile_n = 0;
  bool overlap = true;  // one step's products in flight while the next step's are issued
};

// Enqueues C = A op(B) for every group of `views` on `stream` (op(B) = B^T where
// views.b_k_major, else B). Tiles of 128 rows by tile_n columns, 64 of k a stage. Throws
// std::runtime_error where the driver refuses a tensor map or the launch fails.
void grouped_gemm_sm90(const row_views& views, cudaStream_t stream,
                       const sm90_options& options = {});

}  // namespace muster::kernels::cuda

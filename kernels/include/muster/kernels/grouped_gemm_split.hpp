// A grouped product split into uniform batches and a rest. The experts' groups differ in one
// size only (the forward and dgrad in m, the rows; the wgrad in k, the reduction), and a
// batched product of one shape for every member runs as fast as one dense product, where a
// grouped one of many shapes does not. So the part of that size most groups share runs as
// uniform batches (up to `max_levels` of them, a staircase over m; one over k), and what is
// left of each group as a rest of smaller groups. Host-side bookkeeping only: the GPU runs the
// batches through cublasGemmBatchedEx (cuda::grouped_gemm_method::split_batched), and the CPU
// test runs them through cpu::grouped_gemm to check the offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"

namespace muster::kernels {

// One uniform product: every member C_i = op(A_i) op(B_i) + beta C_i with the same sizes and
// strides.
struct gemm_batch {
  std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
  std::vector<const void*> a, b;
  std::vector<void*> c;
};

struct gemm_split {
  std::vector<gemm_batch> batches;  // run first, in order
  std::vector<gemm_group> rest;     // then these, each with its own beta
  std::vector<float> rest_beta;
  // The batches split the reduction: the rest adds (beta 1) to what they wrote, so a bf16 C is
  // rounded once more (measured worth it in training: kernels/cuda/grouped_gemm.cpp).
  bool along_k = false;
  double batched_share = 0.0;  // of all the groups' FLOPs, in the batches
};

// `element_bytes`: of one element (the pointers move in bytes). Groups with m or n zero are
// left out; with k zero they go to the rest as they are. Nothing is batched (batches empty,
// the groups all in the rest) where the groups differ in n, in a stride, or in both m and k.
// Each batch's varying size is a multiple of `quantum` (>= 1, else std::invalid_argument): on
// the GPU, cuBLAS chooses a kernel per shape and keeps the choice, so batches drawn from few
// sizes find it kept where the experts' counts change at every step.
gemm_split split_into_batches(const gemm_group* groups, int count, const grouped_gemm_args& args,
                              std::size_t element_bytes, int max_levels = 3,
                              std::int64_t quantum = 1);

}  // namespace muster::kernels

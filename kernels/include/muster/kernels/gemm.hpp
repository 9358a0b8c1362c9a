// C = alpha * op(A) op(B) + beta * C for row-major fp32 matrices, op(X) = X or X^T: the one
// matrix product the CPU kernels and the engine's fp32 linear layers call. Backed by oneDNN's
// sgemm where the build found it (about 7% faster than OpenBLAS at the engine's shapes on a
// Zen 4 core), else the system BLAS. Threads: the OpenMP runtime's (LibTorch's) with oneDNN.
#pragma once

#include <cstdint>

namespace muster::kernels::cpu {

// op(A) is (m, k), op(B) is (k, n), C is (m, n); lda, ldb and ldc are row strides as stored.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);

// Which library gemm() calls: "oneDNN" or "BLAS".
const char* gemm_library();

}  // namespace muster::kernels::cpu

// The matrix product: see include/muster/kernels/gemm.hpp.
#include "muster/kernels/gemm.hpp"

#ifdef MUSTER_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif

#include <stdexcept>
#include <string>

namespace muster::kernels::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
#ifdef MUSTER_HAVE_DNNL
  const auto status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                 b, ldb, beta, c, ldc);
  // only bad arguments fail: a caller's bug, never a user's input
  if (status != dnnl_success)
    throw std::logic_error("dnnl_sgemm failed (status " + std::to_string(int(status)) + ")");
#else
  const auto as_int = [](std::int64_t x) { return static_cast<int>(x); };
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, as_int(m), as_int(n), as_int(k), alpha, a,
              as_int(lda), b, as_int(ldb), beta, c, as_int(ldc));
#endif
}

const char* gemm_library() {
#ifdef MUSTER_HAVE_DNNL
  return "oneDNN";
#else
  return "BLAS";
#endif
}

}  // namespace muster::kernels::cpu

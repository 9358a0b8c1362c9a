// Loading cuBLAS and keeping its handles: see cublas_library.hpp.
#include "kernels/cuda/cublas_library.hpp"

#include <map>
#include <stdexcept>
#include <string>

#include "common/shared_library.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace muster::kernels::cuda {

const cublas_library& cublas() {
  static const cublas_library api = [] {
    static const muster::shared_library lib("cuBLAS", {"libcublas.so.13", "libcublas.so.12"});
    cublas_library a;
    a.soname = lib.soname();
    lib.load(a.create, "cublasCreate_v2");
    lib.load(a.set_stream, "cublasSetStream_v2");
    lib.load(a.gemm_ex, "cublasGemmEx");
    lib.load(a.gemm_batched_ex, "cublasGemmBatchedEx");
    lib.load(a.status_string, "cublasGetStatusString");
    a.gemm_grouped_batched_ex = reinterpret_cast<decltype(a.gemm_grouped_batched_ex)>(
        lib.find("cublasGemmGroupedBatchedEx"));
    return a;
  }();
  return api;
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string(what) + " failed: " + cublas().status_string(status));
}

cublasHandle_t cublas_handle(cudaStream_t stream) {
  // Never destroyed: a handle outliving the CUDA runtime's teardown at exit would crash there.
  thread_local std::map<int, cublasHandle_t> handles;
  int device = 0;
  MUSTER_CUDA_CHECK(cudaGetDevice(&device));
  auto& handle = handles[device];
  if (handle == nullptr) check_cublas(cublas().create(&handle), "cublasCreate");
  check_cublas(cublas().set_stream(handle, stream), "cublasSetStream");
  return handle;
}

}  // namespace muster::kernels::cuda

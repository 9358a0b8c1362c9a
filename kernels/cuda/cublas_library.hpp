// cuBLAS, opened at the first use (libcublas.so.13, else .so.12) and one handle per thread and
// device, on the stream of the call. Only what the grouped GEMM needs.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace muster::kernels::cuda {

struct cublas_library {
  std::string soname;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // (cublasGemmEx and cublasGemmBatchedEx are overloaded in C++: their C declarations)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void* const[], cudaDataType, int,
                                    const void* const[], cudaDataType, int, const void*,
                                    void* const[], cudaDataType, int, int, cublasComputeType_t,
                                    cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex = nullptr;  // null before 12.5
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Throws std::runtime_error when cuBLAS cannot be loaded; loaded once per process.
const cublas_library& cublas();

// This thread's handle for the current device, bound to `stream`.
cublasHandle_t cublas_handle(cudaStream_t stream);

// Throws std::runtime_error naming `what` and cuBLAS's status string unless `status` is success.
void check_cublas(cublasStatus_t status, const char* what);

}  // namespace muster::kernels::cuda

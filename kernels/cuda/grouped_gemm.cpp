// Grouped matrix products on the GPU through cuBLAS: see muster/kernels/grouped_gemm.hpp.
// cuBLAS is column-major: a row-major C (m, n) is the column-major C^T (n, m), and
// C^T = op(B)^T op(A)^T, so each product is called with B first and m and n swapped.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_library.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "muster/kernels/grouped_gemm.hpp"

namespace muster::kernels::cuda {
namespace {

int as_int(std::int64_t v, int group, const char* what) {
  if (v > INT_MAX)
    throw std::invalid_argument("grouped gemm: group " + std::to_string(group) + ": " + what + " " +
                                std::to_string(v) + " is over cuBLAS's int range");
  return static_cast<int>(v);
}

std::size_t element_bytes(gemm_dtype t) {
  return t == gemm_dtype::bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
}

cudaDataType_t cuda_type(gemm_dtype t) {
  return t == gemm_dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

// A group with k zero is an empty sum: C = beta C. beta 0 clears C and beta 1 leaves it.
void empty_sum(const gemm_group& g, const grouped_gemm_args& args, cudaStream_t stream) {
  if (args.beta == 1.0f) return;
  if (args.beta != 0.0f)
    throw std::invalid_argument("grouped gemm: k = 0 with beta other than 0 or 1 on the GPU");
  const auto bytes = element_bytes(args.dtype);
  MUSTER_CUDA_CHECK(cudaMemset2DAsync(g.c, static_cast<std::size_t>(g.ldc) * bytes, 0,
                                      static_cast<std::size_t>(g.n) * bytes,
                                      static_cast<std::size_t>(g.m), stream));
}

void per_group(const std::vector<const gemm_group*>& groups, const grouped_gemm_args& args,
               cublasHandle_t handle) {
  const float alpha = 1.0f, beta = args.beta;
  const auto type = cuda_type(args.dtype);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = *groups[i];
    const int gi = static_cast<int>(i);
    check_cublas(
        cublas().gemm_ex(handle, args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                         args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(g.n, gi, "n"),
                         as_int(g.m, gi, "m"), as_int(g.k, gi, "k"), &alpha, g.b, type,
                         as_int(g.ldb, gi, "ldb"), g.a, type, as_int(g.lda, gi, "lda"), &beta, g.c,
                         type, as_int(g.ldc, gi, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
}

// One call for every group (each a batch of one). The pointer arrays must be in device memory:
// they travel in one stream-ordered allocation, freed on the stream after the call.
void grouped_batched(const std::vector<const gemm_group*>& groups, const grouped_gemm_args& args,
                     cublasHandle_t handle, cudaStream_t stream) {
  const auto count = groups.size();
  std::vector<cublasOperation_t> op_b(count, args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N),
      op_a(count, args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<int> m(count), n(count), k(count), lda(count), ldb(count), ldc(count), ones(count, 1);
  std::vector<float> alpha(count, 1.0f), beta(count, args.beta);
  std::vector<const void*> pointers(3 * count);  // B..., A..., C...
  for (std::size_t i = 0; i < count; ++i) {
    const auto& g = *groups[i];
    const int gi = static_cast<int>(i);
    m[i] = as_int(g.n, gi, "n");
    n[i] = as_int(g.m, gi, "m");
    k[i] = as_int(g.k, gi, "k");
    lda[i] = as_int(g.ldb, gi, "ldb");
    ldb[i] = as_int(g.lda, gi, "lda");
    ldc[i] = as_int(g.ldc, gi, "ldc");
    pointers[i] = g.b;
    pointers[count + i] = g.a;
    pointers[2 * count + i] = g.c;
  }
  void* device_pointers = nullptr;
  const auto bytes = pointers.size() * sizeof(void*);
  MUSTER_CUDA_CHECK(cudaMallocAsync(&device_pointers, bytes, stream));
  const auto free_pointers = [&] { cudaFreeAsync(device_pointers, stream); };
  try {
    MUSTER_CUDA_CHECK(
        cudaMemcpyAsync(device_pointers, pointers.data(), bytes, cudaMemcpyHostToDevice, stream));
    auto* const* d = static_cast<void* const*>(device_pointers);
    const auto type = cuda_type(args.dtype);
    check_cublas(cublas().gemm_grouped_batched_ex(
                     handle, op_b.data(), op_a.data(), m.data(), n.data(), k.data(), alpha.data(),
                     d, type, lda.data(), d + count, type, ldb.data(), beta.data(), d + 2 * count,
                     type, ldc.data(), static_cast<int>(count), ones.data(), CUBLAS_COMPUTE_32F),
                 "cublasGemmGroupedBatchedEx");
  } catch (...) {
    free_pointers();
    throw;
  }
  free_pointers();
}

// automatic: one product a group where the groups are large (cuBLAS tunes each), the grouped
// batched call where they are small (one launch). On an H100 (cuBLAS 13.0, gpu_kernels_bench):
// 8 groups of ~4096 x 4096 -> 1536 (52 GFLOP each) ran at 92% of dense one a group, 41%
// grouped; 32 groups of ~1024 x 1024 -> 640 (1.3 GFLOP each) at 26% one a group, 41% grouped.
grouped_gemm_method automatic_method(const std::vector<const gemm_group*>& work) {
  if (cublas().gemm_grouped_batched_ex == nullptr) return grouped_gemm_method::per_group;
  double flops = 0;
  for (const auto* g : work) flops += 2.0 * double(g->m) * double(g->n) * double(g->k);
  constexpr double kLargeGroup = 8e9;  // between the two measured shapes
  return flops / double(work.size()) >= kLargeGroup ? grouped_gemm_method::per_group
                                                    : grouped_gemm_method::grouped_batched;
}

}  // namespace

bool grouped_batched_available() {
  return cublas().gemm_grouped_batched_ex != nullptr;
}

void grouped_gemm(const gemm_group* groups, int count, const grouped_gemm_args& args,
                  void* stream_handle, grouped_gemm_method method) {
  check_gemm_groups(groups, count, args);
  auto* stream = static_cast<cudaStream_t>(stream_handle);
  std::vector<const gemm_group*> work;
  for (int g = 0; g < count; ++g) {
    const auto& x = groups[g];
    if (x.m == 0 || x.n == 0) continue;
    if (x.k == 0)
      empty_sum(x, args, stream);
    else
      work.push_back(&x);
  }
  if (work.empty()) return;
  if (method == grouped_gemm_method::automatic) method = automatic_method(work);
  if (method == grouped_gemm_method::grouped_batched && cublas().gemm_grouped_batched_ex == nullptr)
    throw std::runtime_error("grouped gemm: " + cublas().soname +
                             " has no cublasGemmGroupedBatchedEx (cuBLAS 12.5 or later has it)");
  auto* handle = cublas_handle(stream);
  if (method == grouped_gemm_method::grouped_batched)
    grouped_batched(work, args, handle, stream);
  else
    per_group(work, args, handle);
}

}  // namespace muster::kernels::cuda

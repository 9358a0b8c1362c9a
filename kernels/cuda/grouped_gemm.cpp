// Grouped matrix products on the GPU through cuBLAS: see muster/kernels/grouped_gemm.hpp.
// cuBLAS is column-major: a row-major C (m, n) is the column-major C^T (n, m), and
// C^T = op(B)^T op(A)^T, so each product is called with B first and m and n swapped.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_library.hpp"
#include "kernels/cuda/cuda_check.hpp"
#ifdef MUSTER_HAVE_SM90_GEMM
#include "kernels/cuda/grouped_gemm_sm90.hpp"
#endif
#include "kernels/cuda/stream_upload.hpp"
#include "muster/kernels/grouped_gemm.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"
#include "muster/kernels/grouped_gemm_split.hpp"

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

// The groups to run after the batches, each with its own beta.
struct products {
  std::vector<gemm_group> groups;
  std::vector<float> beta;
};

cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

void per_group(const products& work, const grouped_gemm_args& args, cublasHandle_t handle) {
  const float alpha = 1.0f;
  const auto type = cuda_type(args.dtype);
  for (std::size_t i = 0; i < work.groups.size(); ++i) {
    const auto& g = work.groups[i];
    const int gi = static_cast<int>(i);
    check_cublas(cublas().gemm_ex(handle, op(args.trans_b), op(args.trans_a), as_int(g.n, gi, "n"),
                                  as_int(g.m, gi, "m"), as_int(g.k, gi, "k"), &alpha, g.b, type,
                                  as_int(g.ldb, gi, "ldb"), g.a, type, as_int(g.lda, gi, "lda"),
                                  &work.beta[i], g.c, type, as_int(g.ldc, gi, "ldc"),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
}

// A batched call's pointer arrays must be in device memory (stream_upload.hpp).
template <class Call>
void with_device_pointers(const std::vector<const void*>& pointers, cudaStream_t stream,
                          const Call& call) {
  with_uploaded(pointers.data(), pointers.size() * sizeof(void*), stream,
                [&](const void* d) { call(static_cast<void* const*>(const_cast<void*>(d))); });
}

// One call for every group (each a batch of one).
void grouped_batched(const products& work, const grouped_gemm_args& args, cublasHandle_t handle,
                     cudaStream_t stream) {
  const auto count = work.groups.size();
  if (!pointers_aligned(work.groups.data(), static_cast<int>(count)))
    return per_group(work, args, handle);
  std::vector<cublasOperation_t> op_b(count, op(args.trans_b)), op_a(count, op(args.trans_a));
  std::vector<int> m(count), n(count), k(count), lda(count), ldb(count), ldc(count), ones(count, 1);
  std::vector<float> alpha(count, 1.0f);
  std::vector<const void*> pointers(3 * count);  // B..., A..., C...
  for (std::size_t i = 0; i < count; ++i) {
    const auto& g = work.groups[i];
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
  with_device_pointers(pointers, stream, [&](void* const* d) {
    const auto type = cuda_type(args.dtype);
    check_cublas(
        cublas().gemm_grouped_batched_ex(
            handle, op_b.data(), op_a.data(), m.data(), n.data(), k.data(), alpha.data(), d, type,
            lda.data(), d + count, type, ldb.data(), work.beta.data(), d + 2 * count, type,
            ldc.data(), static_cast<int>(count), ones.data(), CUBLAS_COMPUTE_32F),
        "cublasGemmGroupedBatchedEx");
  });
}

// One uniform batch: one cublasGemmBatchedEx.
void batched(const gemm_batch& b, const grouped_gemm_args& args, cublasHandle_t handle,
             cudaStream_t stream) {
  const auto count = b.a.size();
  products members;
  for (std::size_t i = 0; i < count; ++i)
    members.groups.push_back({b.m, b.n, b.k, b.a[i], b.lda, b.b[i], b.ldb, b.c[i], b.ldc});
  if (!pointers_aligned(members.groups.data(), static_cast<int>(count))) {
    members.beta.assign(count, b.beta);
    return per_group(members, args, handle);
  }
  std::vector<const void*> pointers(b.b.begin(), b.b.end());  // B..., A..., C...
  pointers.insert(pointers.end(), b.a.begin(), b.a.end());
  pointers.insert(pointers.end(), b.c.begin(), b.c.end());
  with_device_pointers(pointers, stream, [&](void* const* d) {
    const auto type = cuda_type(args.dtype);
    const float alpha = 1.0f;
    check_cublas(
        cublas().gemm_batched_ex(handle, op(args.trans_b), op(args.trans_a), as_int(b.n, 0, "n"),
                                 as_int(b.m, 0, "m"), as_int(b.k, 0, "k"), &alpha, d, type,
                                 as_int(b.ldb, 0, "ldb"), d + count, type, as_int(b.lda, 0, "lda"),
                                 &b.beta, d + 2 * count, type, as_int(b.ldc, 0, "ldc"),
                                 static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx");
  });
}

void run_rest(const products& rest, const grouped_gemm_args& args, cublasHandle_t handle,
              cudaStream_t stream) {
  if (rest.groups.empty()) return;
  if (cublas().gemm_grouped_batched_ex != nullptr && rest.groups.size() > 1)
    grouped_batched(rest, args, handle, stream);
  else
    per_group(rest, args, handle);
}

// automatic: one product a group where the groups are large (cuBLAS tunes each). Smaller ones:
// split_batched where its uniform batches hold half the FLOPs or more, else the grouped batched
// call (one launch). On an H200 (cuBLAS 13.0, gpu_kernels_bench, bf16, share of one dense
// product): 8 groups of ~4096 x 4096 -> 1536 (52 GFLOP each) 91% one a group, 40% grouped, 78%
// split; 32 groups of ~1024 x 1024 -> 640 (1.3 GFLOP each) 24% one a group, 44% grouped, 76%
// split; their wgrad 20%, 42%, 49%. The wgrad splits the reduction, so a bf16 C is rounded once
// more, and it pays in training: the ~1B MoE (bench/gpu/moe-1b.toml) ran at 41-44k tokens/s with
// split_batched against 27-28k with the grouped call for the wgrad (the counts not then padded to
// multiples of 8; 36.5k one a group). Groups off 16-byte boundaries run one a group
// (pointers_aligned).
grouped_gemm_method automatic_method(const std::vector<gemm_group>& work, const gemm_split& split) {
  if (!pointers_aligned(work.data(), static_cast<int>(work.size())))
    return grouped_gemm_method::per_group;
  double flops = 0;
  for (const auto& g : work) flops += 2.0 * double(g.m) * double(g.n) * double(g.k);
  constexpr double kLargeGroup = 8e9;  // between the two measured shapes
  if (flops / double(work.size()) >= kLargeGroup) return grouped_gemm_method::per_group;
  if (split.batched_share >= 0.5) return grouped_gemm_method::split_batched;
  return cublas().gemm_grouped_batched_ex != nullptr ? grouped_gemm_method::grouped_batched
                                                     : grouped_gemm_method::per_group;
}

}  // namespace

bool grouped_batched_available() {
  return cublas().gemm_grouped_batched_ex != nullptr;
}

bool sm90_available() {
#ifdef MUSTER_HAVE_SM90_GEMM
  return sm90_device();
#else
  return false;
#endif
}

void grouped_gemm(const gemm_group* groups, int count, const grouped_gemm_args& args,
                  void* stream_handle, grouped_gemm_method method) {
  check_gemm_groups(groups, count, args);
  auto* stream = static_cast<cudaStream_t>(stream_handle);
  if (method == grouped_gemm_method::sm90) {
#ifdef MUSTER_HAVE_SM90_GEMM
    if (sm90_device())
      if (const auto views = as_row_views(groups, count, args)) {
        grouped_gemm_sm90(*views, stream, {args.sm90_tile_n, args.sm90_overlap});
        return;
      }
#endif
    method = grouped_gemm_method::automatic;
  }
  if (args.b_view_rows != 0 || args.c_f32)
    throw std::invalid_argument(
        "grouped gemm: b_view_rows (rows past it as zeros) and c_f32 (an fp32 C) are the sm90 "
        "kernel's alone, and it cannot run these groups here (sm90_available, as_row_views)");
  std::vector<gemm_group> work;
  for (int g = 0; g < count; ++g) {
    const auto& x = groups[g];
    if (x.m == 0 || x.n == 0) continue;
    if (x.k == 0)
      empty_sum(x, args, stream);
    else
      work.push_back(x);
  }
  if (work.empty()) return;
  // Batches of a multiple of split_quantum (64) rows: cuBLAS picks a kernel for each new shape
  // and keeps the pick (on the H200, about 150 us a pick, where the experts' counts made every
  // level a new shape at every step), so levels drawn from few sizes find the pick kept.
  const auto split =
      method == grouped_gemm_method::split_batched || method == grouped_gemm_method::automatic
          ? split_into_batches(work.data(), static_cast<int>(work.size()), args,
                               element_bytes(args.dtype), args.split_levels, args.split_quantum)
          : gemm_split{};
  if (method == grouped_gemm_method::automatic) method = automatic_method(work, split);
  if (method == grouped_gemm_method::grouped_batched && cublas().gemm_grouped_batched_ex == nullptr)
    throw std::runtime_error("grouped gemm: " + cublas().soname +
                             " has no cublasGemmGroupedBatchedEx (cuBLAS 12.5 or later has it)");
  auto* handle = cublas_handle(stream);
  if (method == grouped_gemm_method::split_batched) {
    for (const auto& b : split.batches) batched(b, args, handle, stream);
    run_rest({split.rest, split.rest_beta}, args, handle, stream);
    return;
  }
  const products all{work, std::vector<float>(work.size(), args.beta)};
  if (method == grouped_gemm_method::grouped_batched)
    grouped_batched(all, args, handle, stream);
  else
    per_group(all, args, handle);
}

}  // namespace muster::kernels::cuda

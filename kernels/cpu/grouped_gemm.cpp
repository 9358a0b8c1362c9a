// Grouped matrix products on the CPU: see include/muster/kernels/grouped_gemm.hpp.
#include "muster/kernels/grouped_gemm.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "muster/kernels/gemm.hpp"

namespace muster::kernels {
namespace {

[[noreturn]] void bad_group(int g, const std::string& what) {
  throw std::invalid_argument("grouped gemm: group " + std::to_string(g) + ": " + what);
}

// A row-major (rows, cols) matrix with row stride ld: ld must hold a row.
void check_matrix(int g, const char* name, const void* p, std::int64_t rows, std::int64_t cols,
                  std::int64_t ld) {
  if (rows == 0 || cols == 0) return;
  if (p == nullptr) bad_group(g, std::string(name) + " is null");
  if (ld < cols)
    bad_group(g, std::string("ld") + name + " " + std::to_string(ld) + " is under its row of " +
                     std::to_string(cols));
}

}  // namespace

void check_gemm_groups(const gemm_group* groups, int count, const grouped_gemm_args& args) {
  if (count < 0) throw std::invalid_argument("grouped gemm: negative group count");
  if (count > 0 && groups == nullptr) throw std::invalid_argument("grouped gemm: groups is null");
  if (args.split_levels < 1 || args.split_quantum < 1)
    throw std::invalid_argument("grouped gemm: split_levels " + std::to_string(args.split_levels) +
                                " and split_quantum " + std::to_string(args.split_quantum) +
                                " must be 1 or more");
  if (args.sm90_tile_n != 0 && args.sm90_tile_n != 128 && args.sm90_tile_n != 256)
    throw std::invalid_argument("grouped gemm: sm90_tile_n " + std::to_string(args.sm90_tile_n) +
                                ": use 0 (by n), 128 or 256");
  for (int g = 0; g < count; ++g) {
    const auto& x = groups[g];
    if (x.m < 0 || x.n < 0 || x.k < 0)
      bad_group(g, "negative size m=" + std::to_string(x.m) + " n=" + std::to_string(x.n) +
                       " k=" + std::to_string(x.k));
    // A is stored (m, k), or (k, m) when transposed; B (k, n), or (n, k).
    if (x.m != 0 && x.n != 0 && x.k != 0) {
      check_matrix(g, "a", x.a, args.trans_a ? x.k : x.m, args.trans_a ? x.m : x.k, x.lda);
      check_matrix(g, "b", x.b, args.trans_b ? x.n : x.k, args.trans_b ? x.k : x.n, x.ldb);
    }
    check_matrix(g, "c", x.c, x.m, x.n, x.ldc);
  }
}

bool pointers_aligned(const gemm_group* groups, int count) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  for (int g = 0; g < count; ++g) {
    const auto& x = groups[g];
    if (x.m == 0 || x.n == 0) continue;
    if (!aligned(x.c) || (x.k != 0 && (!aligned(x.a) || !aligned(x.b)))) return false;
  }
  return true;
}

namespace cpu {

void grouped_gemm(const gemm_group* groups, int count, const grouped_gemm_args& args) {
  if (args.dtype != gemm_dtype::f32)
    throw std::invalid_argument("grouped gemm: the CPU takes fp32 only");
  if (args.c_f32)
    throw std::invalid_argument("grouped gemm: c_f32 (bf16 A and B, fp32 C) is the GPU's sm90 "
                                "kernel's alone");
  if (args.b_view_rows != 0)
    throw std::invalid_argument(
        "grouped gemm: b_view_rows (rows past it as zeros) is the GPU's sm90 kernel's alone");
  check_gemm_groups(groups, count, args);
  for (int g = 0; g < count; ++g) {
    const auto& x = groups[g];
    if (x.m == 0 || x.n == 0) continue;
    auto* c = static_cast<float*>(x.c);
    if (x.k == 0) {  // an empty sum: C = beta C
      for (std::int64_t i = 0; i < x.m; ++i)
        for (std::int64_t j = 0; j < x.n; ++j)
          c[i * x.ldc + j] = args.beta == 0.0f ? 0.0f : args.beta * c[i * x.ldc + j];
      continue;
    }
    gemm(args.trans_a, args.trans_b, x.m, x.n, x.k, 1.0f, static_cast<const float*>(x.a), x.lda,
         static_cast<const float*>(x.b), x.ldb, args.beta, c, x.ldc);
  }
}

}  // namespace cpu
}  // namespace muster::kernels

// Splitting a grouped product into uniform batches and a rest: see
// muster/kernels/grouped_gemm_split.hpp.
#include "muster/kernels/grouped_gemm_split.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

namespace muster::kernels {
namespace {

// A level is batched only if it holds this share of all the FLOPs, in two groups or more.
constexpr double kLevelShare = 0.1;

const char* moved(const void* p, std::int64_t elements, std::size_t element_bytes) {
  return static_cast<const char*>(p) + elements * static_cast<std::int64_t>(element_bytes);
}

// `g` past its first `at` rows (m: op(A)'s and C's rows) or reduction steps (k: op(A)'s columns
// and op(B)'s rows), its pointers moved and that size made smaller.
gemm_group skipped(gemm_group g, std::int64_t at, bool along_k, const grouped_gemm_args& args,
                   std::size_t element_bytes) {
  if (along_k) {
    g.k -= at;
    g.a = moved(g.a, args.trans_a ? at * g.lda : at, element_bytes);
    g.b = moved(g.b, args.trans_b ? at : at * g.ldb, element_bytes);
  } else {
    g.m -= at;
    g.a = moved(g.a, args.trans_a ? at : at * g.lda, element_bytes);
    g.c = const_cast<char*>(moved(g.c, at * g.ldc, element_bytes));
  }
  return g;
}

// The size, a multiple of `quantum`, at which the most of `sizes` is covered by one uniform
// batch (size x the groups at least that large), 0 where fewer than two groups would take part.
std::int64_t best_common(std::vector<std::int64_t> sizes, std::int64_t quantum) {
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  std::int64_t best = 0, best_cover = 0;
  for (std::size_t i = 1; i < sizes.size(); ++i) {
    const auto size = sizes[i] / quantum * quantum;
    const auto cover = size * static_cast<std::int64_t>(i + 1);
    if (size > 0 && cover > best_cover) {
      best = size;
      best_cover = cover;
    }
  }
  return best;
}

// Which one size the groups differ in: 'm', 'k', '=' (none) or 0 (more, or n or a stride).
char varying_size(const std::vector<gemm_group>& work) {
  const auto& f = work.front();
  bool same_m = true, same_k = true;
  for (const auto& g : work) {
    if (g.n != f.n || g.lda != f.lda || g.ldb != f.ldb || g.ldc != f.ldc) return 0;
    same_m = same_m && g.m == f.m;
    same_k = same_k && g.k == f.k;
  }
  if (same_m && same_k) return '=';
  if (same_k) return 'm';
  return same_m ? 'k' : 0;
}

}  // namespace

gemm_split split_into_batches(const gemm_group* groups, int count, const grouped_gemm_args& args,
                              std::size_t element_bytes, int max_levels, std::int64_t quantum) {
  if (quantum < 1)
    throw std::invalid_argument("split_into_batches: quantum " + std::to_string(quantum) +
                                " is below 1");
  gemm_split out;
  std::vector<gemm_group> work;
  double flops = 0;
  for (int i = 0; i < count; ++i) {
    if (groups[i].m == 0 || groups[i].n == 0) continue;
    if (groups[i].k == 0) {
      out.rest.push_back(groups[i]);
      out.rest_beta.push_back(args.beta);
    } else {
      work.push_back(groups[i]);
      flops += 2.0 * double(groups[i].m) * double(groups[i].n) * double(groups[i].k);
    }
  }
  const char varying = work.size() < 2 ? 0 : varying_size(work);
  out.along_k = varying == 'k';
  // done[i]: how much of work[i]'s varying size (rows, or reduction) the batches took
  std::vector<std::int64_t> done(work.size(), 0);
  const auto left = [&](std::size_t i) { return (out.along_k ? work[i].k : work[i].m) - done[i]; };
  for (int level = 0; varying != 0 && level < (out.along_k ? 1 : max_levels); ++level) {
    std::vector<std::int64_t> sizes;
    for (std::size_t i = 0; i < work.size(); ++i) sizes.push_back(left(i));
    const auto common = best_common(sizes, quantum);
    if (common == 0) break;
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < work.size(); ++i)
      if (sizes[i] >= common) members.push_back(i);
    const auto& f = work.front();
    gemm_batch b{out.along_k ? f.m : common,
                 f.n,
                 out.along_k ? common : f.k,
                 f.lda,
                 f.ldb,
                 f.ldc,
                 args.beta,
                 {},
                 {},
                 {}};
    const double share =
        2.0 * double(b.m) * double(b.n) * double(b.k) * double(members.size()) / flops;
    if (share < kLevelShare) break;
    for (const auto i : members) {  // each from where the levels before left it
      const auto g = skipped(work[i], done[i], out.along_k, args, element_bytes);
      b.a.push_back(g.a);
      b.b.push_back(g.b);
      b.c.push_back(g.c);
      done[i] += common;
    }
    out.batched_share += share;
    out.batches.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (left(i) == 0) continue;
    out.rest.push_back(skipped(work[i], done[i], out.along_k, args, element_bytes));
    // a reduction the batches began is added to
    out.rest_beta.push_back(out.along_k && done[i] > 0 ? 1.0f : args.beta);
  }
  return out;
}

}  // namespace muster::kernels

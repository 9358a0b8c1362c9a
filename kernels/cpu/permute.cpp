// Token permutation on the CPU: see muster/kernels/permute.hpp. The index is a counting sort
// (count, scan, place in assignment order); the row copies and combines go token by token, the
// bf16 ones through fp32 chunks (bf16_lanes.hpp).
#include "muster/kernels/permute.hpp"

#include "bf16_lanes.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace muster::kernels {

void check_permute_shape(const permute_shape& s) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("permute: " + what); };
  if (s.num_tokens < 0) bad("num_tokens " + std::to_string(s.num_tokens) + " is negative");
  if (s.topk < 1) bad("topk " + std::to_string(s.topk) + " is below 1");
  if (s.num_experts < 1) bad("num_experts " + std::to_string(s.num_experts) + " is below 1");
  if (s.hidden < 1) bad("hidden " + std::to_string(s.hidden) + " is below 1");
}

namespace cpu {

void permute_index(const std::int64_t* experts, std::int64_t* counts, std::int64_t* offsets,
                   std::int64_t* row_of, std::int64_t* source_of, const permute_shape& s) {
  check_permute_shape(s);
  const std::int64_t n = s.num_tokens * s.topk, num_experts = s.num_experts;
  std::fill(counts, counts + num_experts, 0);
  for (std::int64_t a = 0; a < n; ++a)
    if (experts[a] >= 0 && experts[a] < num_experts) ++counts[experts[a]];
  offsets[0] = 0;
  for (std::int64_t e = 0; e < num_experts; ++e) offsets[e + 1] = offsets[e] + counts[e];
  // next free row of each expert: counts is reused after it was scanned into offsets
  std::copy(offsets, offsets + num_experts, counts);
  for (std::int64_t a = 0; a < n; ++a) {
    const auto e = experts[a];
    if (e < 0 || e >= num_experts) {
      row_of[a] = -1;
      continue;
    }
    const auto row = counts[e]++;
    row_of[a] = row;
    source_of[row] = a;
  }
  for (std::int64_t e = 0; e < num_experts; ++e) counts[e] = offsets[e + 1] - offsets[e];
}

namespace {

// Calls body(a, row, weight) for each kept assignment a (its row, its weight or 1 without
// weights); a dropped one gets a zero weight gradient, where those are wanted.
template <class Body>
void for_each_kept(const std::int64_t* row_of, const float* weights, float* grad_weights,
                   const permute_shape& s, Body&& body) {
  for (std::int64_t a = 0; a < s.num_tokens * s.topk; ++a) {
    if (row_of[a] < 0) {
      if (grad_weights) grad_weights[a] = 0.0f;
      continue;
    }
    body(a, row_of[a], weights ? weights[a] : 1.0f);
  }
}

template <class T>
void copy_rows(const T* x, const std::int64_t* source_of, std::int64_t num_rows, T* out,
               const permute_shape& s) {
  check_permute_shape(s);
  const auto h = s.hidden;
  for (std::int64_t r = 0; r < num_rows; ++r)
    std::memcpy(out + r * h, x + (source_of[r] / s.topk) * h, sizeof(T) * std::size_t(h));
}

}  // namespace

void permute_rows(const float* x, const std::int64_t* source_of, std::int64_t num_rows, float* out,
                  const permute_shape& s) {
  copy_rows(x, source_of, num_rows, out, s);
}

void permute_rows(const bf16* x, const std::int64_t* source_of, std::int64_t num_rows, bf16* out,
                  const permute_shape& s) {
  copy_rows(x, source_of, num_rows, out, s);
}

void unpermute(const float* rows, const std::int64_t* row_of, const float* weights, float* y,
               const permute_shape& s) {
  check_permute_shape(s);
  const auto h = s.hidden;
  for (std::int64_t t = 0; t < s.num_tokens; ++t) {
    float* out = y + t * h;
    std::fill(out, out + h, 0.0f);
    for (int j = 0; j < s.topk; ++j) {
      const auto a = t * s.topk + j;
      if (row_of[a] < 0) continue;
      const float w = weights ? weights[a] : 1.0f;
      const float* in = rows + row_of[a] * h;
      for (std::int64_t i = 0; i < h; ++i) out[i] += w * in[i];
    }
  }
}

void unpermute_backward(const float* rows, const std::int64_t* row_of, const float* weights,
                        const float* grad_y, float* grad_rows, float* grad_weights,
                        const permute_shape& s) {
  check_permute_shape(s);
  const auto h = s.hidden;
  for_each_kept(row_of, weights, grad_weights, s, [&](std::int64_t a, std::int64_t row, float w) {
    const float* g = grad_y + (a / s.topk) * h;
    float* gr = grad_rows + row * h;
    for (std::int64_t i = 0; i < h; ++i) gr[i] = w * g[i];
    if (!grad_weights) return;
    const float* in = rows + row * h;
    float dot = 0;
    for (std::int64_t i = 0; i < h; ++i) dot += g[i] * in[i];
    grad_weights[a] = dot;
  });
}

void unpermute(const bf16* rows, const std::int64_t* row_of, const float* weights, bf16* y,
               const permute_shape& s) {
  check_permute_shape(s);
  const auto h = s.hidden;
  for (std::int64_t t = 0; t < s.num_tokens; ++t)
    for_each_chunk(h, [&](std::int64_t at, std::int64_t m) {
      float sum[kBf16Chunk] = {}, in[kBf16Chunk];
      for (int j = 0; j < s.topk; ++j) {
        const auto a = t * s.topk + j;
        if (row_of[a] < 0) continue;
        const float w = weights ? weights[a] : 1.0f;
        widen(rows + row_of[a] * h + at, in, m);
        for (std::int64_t i = 0; i < m; ++i) sum[i] += w * in[i];
      }
      narrow(sum, y + t * h + at, m);
    });
}

void unpermute_backward(const bf16* rows, const std::int64_t* row_of, const float* weights,
                        const bf16* grad_y, bf16* grad_rows, float* grad_weights,
                        const permute_shape& s) {
  check_permute_shape(s);
  const auto h = s.hidden;
  for_each_kept(row_of, weights, grad_weights, s, [&](std::int64_t a, std::int64_t kept, float w) {
    const bf16* g = grad_y + (a / s.topk) * h;
    const std::int64_t row = kept * h;
    float dot = 0;
    for_each_chunk(h, [&](std::int64_t at, std::int64_t m) {
      float grad[kBf16Chunk], out[kBf16Chunk];
      widen(g + at, grad, m);
      for (std::int64_t i = 0; i < m; ++i) out[i] = w * grad[i];
      narrow(out, grad_rows + row + at, m);
      if (!grad_weights) return;
      widen(rows + row + at, out, m);
      for (std::int64_t i = 0; i < m; ++i) dot += grad[i] * out[i];
    });
    if (grad_weights) grad_weights[a] = dot;
  });
}

}  // namespace cpu
}  // namespace muster::kernels

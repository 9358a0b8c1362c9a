// Causal attention on the CPU: see include/muster/kernels/causal_attention.hpp.
// Per (row, kv head, block of positions): the block's query rows of every head in the kv
// head's group are packed (and scaled) into one (group * rows, head_dim) matrix, so each
// product is one gemm over the block's keys, read in place from k and v (a row stride of
// kv_heads * head_dim); results are scattered back to the token-major layout.
#include "muster/kernels/causal_attention.hpp"
#include "muster/kernels/gemm.hpp"

#include <algorithm>
#include <vector>

#include "exp_approx.hpp"
#include "lane_sums.hpp"
#include "vector_targets.hpp"

namespace muster::kernels::cpu {
namespace {

// One block of query positions [first, first + rows) of a row, and the keys it is scored
// against: [key0, key0 + keys), key0 the earliest document start among its rows.
struct block {
  std::int64_t first, rows, key0, keys;
};

std::int64_t block_rows(std::int64_t seq) {
  return seq >= 2 * kCausalBlock ? kCausalBlock : seq;
}

// Calls f(block) for each block of a row, given the row's first_key.
template <class F>
void for_each_block(std::int64_t seq, const std::int64_t* first_key, F&& f) {
  const auto step = block_rows(seq);
  for (std::int64_t first = 0; first < seq; first += step) {
    const auto rows = std::min(step, seq - first);
    const auto key0 = *std::min_element(first_key + first, first_key + first + rows);
    f(block{first, rows, key0, first + rows - key0});
  }
}

// The layout arithmetic of one (batch row, kv head): where a position's heads and keys are.
struct head_group {
  const attention_dims& d;
  std::int64_t b, kv;
  std::int64_t group() const { return d.heads / d.kv_heads; }
  // the first float of query head `kv * group + g` at position `pos` (q, out and their grads)
  std::int64_t query(std::int64_t pos, std::int64_t g) const {
    return ((b * d.seq + pos) * d.heads + kv * group() + g) * d.head_dim;
  }
  // the first float of this kv head at position `pos` (k, v and their grads)
  std::int64_t key(std::int64_t pos) const {
    return ((b * d.seq + pos) * d.kv_heads + kv) * d.head_dim;
  }
  std::int64_t key_stride() const { return d.kv_heads * d.head_dim; }
};

// packed[(g * rows + r) * hd + c] = scale * src[query(first + r, g) + c]
void pack_queries(const head_group& h, const block& blk, const float* src, float scale,
                  float* packed) {
  const auto hd = h.d.head_dim;
  for (std::int64_t g = 0; g < h.group(); ++g)
    for (std::int64_t r = 0; r < blk.rows; ++r) {
      const float* from = src + h.query(blk.first + r, g);
      float* to = packed + (g * blk.rows + r) * hd;
      for (std::int64_t c = 0; c < hd; ++c) to[c] = scale * from[c];
    }
}

// dst[query(first + r, g) + c] = packed[(g * rows + r) * hd + c]
void unpack_queries(const head_group& h, const block& blk, const float* packed, float* dst) {
  const auto hd = h.d.head_dim;
  for (std::int64_t g = 0; g < h.group(); ++g)
    for (std::int64_t r = 0; r < blk.rows; ++r)
      std::copy_n(packed + (g * blk.rows + r) * hd, hd, dst + h.query(blk.first + r, g));
}

// A score row of n keys -> its probabilities over [lo, hi] (inclusive), 0 outside.
MUSTER_VECTOR_CLONES void softmax_span(float* __restrict row, std::int64_t n, std::int64_t lo,
                                       std::int64_t hi) {
  float m = row[lo];
  for (std::int64_t j = lo + 1; j <= hi; ++j) m = std::max(m, row[j]);
  for (std::int64_t j = lo; j <= hi; ++j) row[j] = exp_approx(row[j] - m);
  const float inv = 1.0f / sum_lanes(row + lo, hi - lo + 1);
  for (std::int64_t j = lo; j <= hi; ++j) row[j] *= inv;
  std::fill(row, row + lo, 0.0f);
  std::fill(row + hi + 1, row + n, 0.0f);
}

// d(scores) from d(probs) in place: ds = p * (dp - sum(p * dp)) (0 where p is).
MUSTER_VECTOR_CLONES void softmax_backward_row(const float* __restrict p, float* __restrict dp,
                                               std::int64_t n) {
  const float dot = dot_lanes(p, dp, n);
  for (std::int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dot);
}

// The probabilities of a block (group * rows, keys) from its scores, in place.
void block_softmax(const head_group& h, const block& blk, const std::int64_t* first_key,
                   float* scores) {
  for (std::int64_t g = 0; g < h.group(); ++g)
    for (std::int64_t r = 0; r < blk.rows; ++r) {
      const auto pos = blk.first + r;
      softmax_span(scores + (g * blk.rows + r) * blk.keys, blk.keys, first_key[pos] - blk.key0,
                   pos - blk.key0);
    }
}

}  // namespace

std::int64_t causal_attention_saved_floats(const attention_dims& d, const std::int64_t* first_key) {
  std::int64_t n = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for_each_block(d.seq, first_key + b * d.seq,
                   [&](const block& blk) { n += d.heads * blk.rows * blk.keys; });
  return n;
}

void causal_attention_forward(const attention_dims& d, const float* q, const float* k,
                              const float* v, const std::int64_t* first_key, float scale,
                              float* out, float* probs) {
  const auto hd = d.head_dim, group = d.heads / d.kv_heads, most = group * block_rows(d.seq);
  std::vector<float> packed(most * hd), result(most * hd);
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const std::int64_t* keys_of = first_key + b * d.seq;
    for_each_block(d.seq, keys_of, [&](const block& blk) {
      const auto m = group * blk.rows;
      for (std::int64_t kv = 0; kv < d.kv_heads; ++kv) {
        const head_group h{d, b, kv};
        float* p = probs;
        probs += m * blk.keys;
        pack_queries(h, blk, q, scale, packed.data());
        // scores (m, keys) = packed (m, hd) . k[key0 ..]^T
        gemm(false, true, m, blk.keys, hd, 1.0f, packed.data(), hd, k + h.key(blk.key0),
             h.key_stride(), 0.0f, p, blk.keys);
        block_softmax(h, blk, keys_of, p);
        // out (m, hd) = probs (m, keys) . v[key0 ..]
        gemm(false, false, m, hd, blk.keys, 1.0f, p, blk.keys, v + h.key(blk.key0), h.key_stride(),
             0.0f, result.data(), hd);
        unpack_queries(h, blk, result.data(), out);
      }
    });
  }
}

void causal_attention_backward(const attention_dims& d, const float* q, const float* k,
                               const float* v, const std::int64_t* first_key, float scale,
                               const float* probs, const float* grad_out, float* grad_q,
                               float* grad_k, float* grad_v) {
  const auto hd = d.head_dim, group = d.heads / d.kv_heads, most = group * block_rows(d.seq);
  std::fill_n(grad_k, d.batch * d.seq * d.kv_heads * hd, 0.0f);
  std::fill_n(grad_v, d.batch * d.seq * d.kv_heads * hd, 0.0f);
  std::vector<float> packed_q(most * hd), packed_g(most * hd), result(most * hd);
  std::vector<float> grad_scores(most * d.seq);
  for (std::int64_t b = 0; b < d.batch; ++b) {
    for_each_block(d.seq, first_key + b * d.seq, [&](const block& blk) {
      const auto m = group * blk.rows;
      const auto ld = blk.keys;
      for (std::int64_t kv = 0; kv < d.kv_heads; ++kv) {
        const head_group h{d, b, kv};
        const float* p = probs;
        probs += m * blk.keys;
        const auto stride = h.key_stride();
        pack_queries(h, blk, q, scale, packed_q.data());
        pack_queries(h, blk, grad_out, 1.0f, packed_g.data());
        // grad_v[key0 ..] += probs^T (keys, m) . grad_out (m, hd)
        gemm(true, false, ld, hd, m, 1.0f, p, ld, packed_g.data(), hd, 1.0f,
             grad_v + h.key(blk.key0), stride);
        // grad_probs (m, keys) = grad_out (m, hd) . v[key0 ..]^T, then grad_scores in place
        float* ds = grad_scores.data();
        gemm(false, true, m, ld, hd, 1.0f, packed_g.data(), hd, v + h.key(blk.key0), stride, 0.0f,
             ds, ld);
        for (std::int64_t row = 0; row < m; ++row)
          softmax_backward_row(p + row * blk.keys, ds + row * blk.keys, blk.keys);
        // grad_q (m, hd) = scale * grad_scores (m, keys) . k[key0 ..]
        gemm(false, false, m, hd, ld, scale, ds, ld, k + h.key(blk.key0), stride, 0.0f,
             result.data(), hd);
        unpack_queries(h, blk, result.data(), grad_q);
        // grad_k[key0 ..] += grad_scores^T (keys, m) . (scale * q) (m, hd)
        gemm(true, false, ld, hd, m, 1.0f, ds, ld, packed_q.data(), hd, 1.0f,
             grad_k + h.key(blk.key0), stride);
      }
    });
  }
}

}  // namespace muster::kernels::cpu

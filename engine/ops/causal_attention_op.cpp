// The attention core over the CPU kernel: see causal_attention_op.hpp.
#include "engine/ops/causal_attention_op.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/causal_attention.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using kernels::cpu::attention_dims;

attention_dims dims_of(const torch::Tensor& q, const torch::Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

// The kernel runs over the batch rows split across LibTorch's intra-op threads: every tensor is
// token-major, so rows [b, ...) start at b rows of floats in, and their probabilities after the
// earlier rows' (probs_at[b]). Rows are independent, so the split changes no result beyond
// rounding (oneDNN's sgemm can sum in another order with another thread count).
struct row_split {
  attention_dims d;
  const std::int64_t* keys;
  std::vector<std::int64_t> probs_at;  // batch + 1 offsets

  row_split(const attention_dims& dims, const torch::Tensor& first_key)
      : d(dims), keys(first_key.data_ptr<std::int64_t>()), probs_at{0} {
    auto one = d;
    one.batch = 1;
    for (std::int64_t b = 0; b < d.batch; ++b)
      probs_at.push_back(probs_at.back() +
                         kernels::cpu::causal_attention_saved_floats(one, keys + b * d.seq));
  }
  std::int64_t query_floats() const { return d.seq * d.heads * d.head_dim; }   // a row of q
  std::int64_t key_floats() const { return d.seq * d.kv_heads * d.head_dim; }  // a row of k
  // f(first row, dims of the rows) on each thread's rows
  template <class F>
  void run(F&& f) const {
    at::parallel_for(0, d.batch, 1, [&](std::int64_t begin, std::int64_t end) {
      auto part = d;
      part.batch = end - begin;
      f(begin, part);
    });
  }
};

struct causal_attention_function : torch::autograd::Function<causal_attention_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& first_key) {
    const row_split rows(dims_of(q, k), first_key);
    const float scale = float(1.0 / std::sqrt(double(rows.d.head_dim)));
    auto probs = torch::empty({rows.probs_at.back()}, q.options());
    auto out = torch::empty_like(q);
    const float *pq = q.data_ptr<float>(), *pk = k.data_ptr<float>(), *pv = v.data_ptr<float>();
    float *po = out.data_ptr<float>(), *pp = probs.data_ptr<float>();
    rows.run([&](std::int64_t b, const attention_dims& part) {
      const auto qo = b * rows.query_floats(), ko = b * rows.key_floats();
      kernels::cpu::causal_attention_forward(part, pq + qo, pk + ko, pv + ko,
                                             rows.keys + b * part.seq, scale, po + qo,
                                             pp + rows.probs_at[b]);
    });
    ctx->save_for_backward({q, k, v, first_key, probs});
    ctx->saved_data["scale"] = double(scale);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &first_key = saved[3],
               &probs = saved[4];
    const auto grad_out = grads[0].contiguous();
    auto grad_q = torch::empty_like(q), grad_k = torch::empty_like(k),
         grad_v = torch::empty_like(v);
    const row_split rows(dims_of(q, k), first_key);
    const float scale = float(ctx->saved_data["scale"].toDouble());
    const float *pq = q.data_ptr<float>(), *pk = k.data_ptr<float>(), *pv = v.data_ptr<float>();
    const float *pp = probs.data_ptr<float>(), *pg = grad_out.data_ptr<float>();
    float *dq = grad_q.data_ptr<float>(), *dk = grad_k.data_ptr<float>(),
          *dv = grad_v.data_ptr<float>();
    rows.run([&](std::int64_t b, const attention_dims& part) {
      const auto qo = b * rows.query_floats(), ko = b * rows.key_floats();
      kernels::cpu::causal_attention_backward(
          part, pq + qo, pk + ko, pv + ko, rows.keys + b * part.seq, scale, pp + rows.probs_at[b],
          pg + qo, dq + qo, dk + ko, dv + ko);
    });
    return {grad_q, grad_k, grad_v, torch::Tensor()};
  }
};

}  // namespace

std::optional<torch::Tensor> causal_key_ranges(const torch::Tensor& allowed) {
  const auto seq = allowed.size(-1);
  const auto a = allowed.reshape({-1, seq, seq}).to(torch::kCPU, torch::kBool).contiguous();
  auto first = torch::empty({a.size(0), seq}, torch::kInt64);
  const bool* row = a.data_ptr<bool>();
  auto* out = first.data_ptr<std::int64_t>();
  // one pass over the mask: each query's row must read false*, true* up to itself, false*
  for (std::int64_t r = 0; r < a.size(0) * seq; ++r, row += seq) {
    const auto i = r % seq;
    const auto begin = std::find(row, row + i + 1, true) - row;
    if (begin > i || std::find(row + begin, row + i + 1, false) != row + i + 1 ||
        std::find(row + i + 1, row + seq, true) != row + seq)
      return std::nullopt;
    out[r] = begin;
  }
  return first;
}

bool causal_attention_cpu_takes(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v) {
  for (const auto* t : {&q, &k, &v})
    if (!cpu_fp32(*t) || t->dim() != 4) return false;
  return k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
         q.size(3) == k.size(3) && k.size(2) > 0 && q.size(2) % k.size(2) == 0;
}

torch::Tensor causal_attention_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& first_key) {
  return causal_attention_function::apply(q.contiguous(), k.contiguous(), v.contiguous(),
                                          first_key.contiguous());
}

}  // namespace muster::engine::ops

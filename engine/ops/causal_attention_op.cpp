// The attention core over the CPU kernel: see causal_attention_op.hpp.
#include "engine/ops/causal_attention_op.hpp"

#include <cmath>

#include "muster/kernels/causal_attention.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::cpu::attention_dims dims_of(const torch::Tensor& q, const torch::Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

struct causal_attention_function : torch::autograd::Function<causal_attention_function> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& first_key) {
    const auto d = dims_of(q, k);
    const float scale = float(1.0 / std::sqrt(double(d.head_dim)));
    const auto* keys = first_key.data_ptr<std::int64_t>();
    auto probs = torch::empty({kernels::cpu::causal_attention_saved_floats(d, keys)}, q.options());
    auto out = torch::empty_like(q);
    kernels::cpu::causal_attention_forward(d, q.data_ptr<float>(), k.data_ptr<float>(),
                                           v.data_ptr<float>(), keys, scale,
                                           out.data_ptr<float>(), probs.data_ptr<float>());
    ctx->save_for_backward({q, k, v, first_key, probs});
    ctx->saved_data["scale"] = double(scale);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &first_key = saved[3], &probs = saved[4];
    const auto grad_out = grads[0].contiguous();
    auto grad_q = torch::empty_like(q), grad_k = torch::empty_like(k), grad_v = torch::empty_like(v);
    kernels::cpu::causal_attention_backward(
        dims_of(q, k), q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
        first_key.data_ptr<std::int64_t>(), float(ctx->saved_data["scale"].toDouble()),
        probs.data_ptr<float>(), grad_out.data_ptr<float>(), grad_q.data_ptr<float>(),
        grad_k.data_ptr<float>(), grad_v.data_ptr<float>());
    return {grad_q, grad_k, grad_v, torch::Tensor()};
  }
};

}  // namespace

std::optional<torch::Tensor> causal_key_ranges(const torch::Tensor& allowed) {
  const auto seq = allowed.size(-1);
  const auto a = allowed.reshape({allowed.size(0), seq, seq}).cpu();
  auto first = a.to(torch::kUInt8).argmax(-1);  // the first allowed key of each query
  const auto j = torch::arange(seq, first.options());
  const auto range = j.view({1, 1, seq}).ge(first.unsqueeze(-1)) & j.view({1, 1, seq}).le(j.view({1, seq, 1}));
  if (!torch::equal(a, range)) return std::nullopt;
  return first;
}

bool causal_attention_cpu_takes(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v) {
  for (const auto* t : {&q, &k, &v})
    if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat32 || t->dim() != 4) return false;
  return k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(1) == k.size(1) &&
         q.size(3) == k.size(3) && k.size(2) > 0 && q.size(2) % k.size(2) == 0;
}

torch::Tensor causal_attention_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& first_key) {
  return causal_attention_function::apply(q.contiguous(), k.contiguous(), v.contiguous(),
                                          first_key.contiguous());
}

}  // namespace muster::engine::ops

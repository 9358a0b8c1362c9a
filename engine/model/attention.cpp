// Grouped-query attention: see attention.hpp.
#include "engine/model/attention.hpp"

#include "engine/model/causal_attention.hpp"
#include "engine/ops/linear_op.hpp"
#include "engine/model/recompute.hpp"

namespace muster::engine::model {

torch::Tensor attention_mask(const torch::Tensor& segments) {
  const auto seq = segments.size(1);
  auto causal = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool)
                                             .device(segments.device()))
                    .tril();
  auto same_doc = segments.unsqueeze(2) == segments.unsqueeze(1);  // (b, s, s)
  return (same_doc & causal).unsqueeze(1);
}

attention::attention(const model_config& c)
    : num_heads_(c.num_heads), num_kv_heads_(c.num_kv_heads), head_dim_(c.head_dim),
      recompute_core_(c.recompute_attention_core) {
  auto linear = [&](std::int64_t in, std::int64_t out, bool bias) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
  };
  q_proj = register_module("q_proj", linear(c.hidden_size, c.num_heads * c.head_dim, c.attention_bias));
  k_proj = register_module("k_proj", linear(c.hidden_size, c.num_kv_heads * c.head_dim, c.attention_bias));
  v_proj = register_module("v_proj", linear(c.hidden_size, c.num_kv_heads * c.head_dim, c.attention_bias));
  o_proj = register_module("o_proj", linear(c.num_heads * c.head_dim, c.hidden_size, false));
  if (c.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<rms_norm>(c.head_dim, c.norm_eps));
    k_norm = register_module("k_norm", std::make_shared<rms_norm>(c.head_dim, c.norm_eps));
  }
}

torch::Tensor attention::forward(const torch::Tensor& x, const rotary_tables& rope,
                                 const torch::Tensor& mask) {
  const auto batch = x.size(0), seq = x.size(1);
  // (b, s, heads * hd) -> (b, s, heads, hd), where each head's vector is contiguous (the
  // q/k norms run over it), then (b, heads, s, hd)
  // q, k and v from one product where their weights lie one after another (their FSDP unit)
  torch::Tensor q, k, v;
  if (const auto qkv = ops::joined_linear(x, {q_proj, k_proj, v_proj}); qkv.defined()) {
    const auto parts = qkv.split_with_sizes(
        {num_heads_ * head_dim_, num_kv_heads_ * head_dim_, num_kv_heads_ * head_dim_}, -1);
    // v and the normed q and k are kept for backward: copies of their own, where a view would
    // keep the whole product alive (and the norms' kernels take contiguous rows)
    q = q_norm ? parts[0].contiguous() : parts[0];
    k = q_norm ? parts[1].contiguous() : parts[1];
    v = parts[2].contiguous();
  } else {
    q = ops::linear(x, q_proj), k = ops::linear(x, k_proj), v = ops::linear(x, v_proj);
  }
  q = q.view({batch, seq, num_heads_, head_dim_});
  k = k.view({batch, seq, num_kv_heads_, head_dim_});
  v = v.view({batch, seq, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = apply_rotary(q.transpose(1, 2), rope);
  k = apply_rotary(k.transpose(1, 2), rope);
  auto core = [mask](const torch::autograd::variable_list& qkv) -> torch::autograd::variable_list {
    return {causal_attention(qkv[0], qkv[1], qkv[2], mask)};  // (b, heads, s, hd)
  };
  auto out = recompute_core_ ? recompute(core, {q, k, v})[0] : core({q, k, v})[0];
  return ops::linear(out.transpose(1, 2).reshape({batch, seq, num_heads_ * head_dim_}), o_proj);
}

}  // namespace muster::engine::model

// Grouped-query attention: see attention.hpp.
#include "engine/model/attention.hpp"

#include <cmath>

#include "engine/model/recompute.hpp"

namespace muster::engine::model {
namespace {

// Query rows per causal block (see attention::forward).
constexpr std::int64_t kCausalBlock = 64;

}  // namespace

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
  // (b, s, heads * hd) -> (b, heads, s, hd)
  auto heads = [&](const torch::Tensor& t, std::int64_t n) {
    return t.view({batch, seq, n, head_dim_}).transpose(1, 2);
  };
  auto q = heads(q_proj(x), num_heads_);
  auto k = heads(k_proj(x), num_kv_heads_);
  auto v = heads(v_proj(x), num_kv_heads_);
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = apply_rotary(q, rope);
  k = apply_rotary(k, rope);
  // Query head h reads key/value head h / group, as Hugging Face's repeat_kv, without copying
  // k and v: the group's query heads are stacked along the rows of one matmul per kv head.
  // Causal: queries go in blocks, and a block is scored only against the keys up to its last
  // position, which skips about half of the scores, softmax and their backward at long rows.
  const auto group = num_heads_ / num_kv_heads_;
  auto core = [mask, group, batch, seq, kv = num_kv_heads_, hd = head_dim_,
               scale = 1.0 / std::sqrt(double(head_dim_))](
                  const torch::autograd::variable_list& qkv) -> torch::autograd::variable_list {
    const std::int64_t block = seq >= 2 * kCausalBlock ? kCausalBlock : seq;
    auto q = qkv[0].view({batch, kv, group, seq, hd});
    std::vector<torch::Tensor> outs;
    for (std::int64_t first = 0; first < seq; first += block) {
      const auto rows = std::min(block, seq - first), keys = first + rows;
      auto qb = q.narrow(3, first, rows).reshape({batch, kv, group * rows, hd});
      auto scores = torch::matmul(qb, qkv[1].narrow(2, 0, keys).transpose(-2, -1))
                        .view({batch, kv * group, rows, keys});
      const auto allowed = mask.narrow(2, first, rows).narrow(3, 0, keys);
      scores = (scores * scale).masked_fill(allowed.logical_not(),
                                            -std::numeric_limits<double>::infinity());
      // softmax in fp32 at least (bf16 scores lose the small probabilities)
      auto probs = torch::softmax(scores, -1, c10::promoteTypes(scores.scalar_type(), torch::kFloat32))
                       .to(qb.scalar_type());
      outs.push_back(torch::matmul(probs.view({batch, kv, group * rows, keys}),
                                   qkv[2].narrow(2, 0, keys))
                         .view({batch, kv, group, rows, hd}));
    }
    auto out = outs.size() == 1 ? outs[0] : torch::cat(outs, 3);
    return {out.view({batch, kv * group, seq, hd})};  // (b, heads, s, hd)
  };
  auto out = recompute_core_ ? recompute(core, {q, k, v})[0] : core({q, k, v})[0];
  return o_proj(out.transpose(1, 2).reshape({batch, seq, num_heads_ * head_dim_}));
}

}  // namespace muster::engine::model

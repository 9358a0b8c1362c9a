// The attention core with its own backward: see causal_attention.hpp.
#include "engine/model/causal_attention.hpp"

#include <cmath>
#include <limits>

#include <torch/version.h>

#include "engine/ops/autocast_query.hpp"

#include "engine/ops/causal_attention_op.hpp"
#include "muster/kernels/causal_attention.hpp"

namespace muster::engine::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using kernels::cpu::kCausalBlock;  // the kernel's blocks, so both paths skip the same scores

// Rows per block for a row of `seq` tokens: one block when blocking saves nothing.
std::int64_t block_rows(std::int64_t seq) {
  return seq >= 2 * kCausalBlock ? kCausalBlock : seq;
}

// (batch, kv, group, seq, hd) -> rows [first, first + rows) as (batch, kv, group * rows, hd).
torch::Tensor query_block(const torch::Tensor& q5, std::int64_t first, std::int64_t rows) {
  const auto s = q5.sizes();
  return q5.narrow(3, first, rows).reshape({s[0], s[1], s[2] * rows, s[4]});
}

// -inf where `blocked` (b, 1, rows, >= keys) is true, in a block's scores (b, heads, rows, keys)
// for query rows [first, first + rows). The keys before `first` are masked only when some pair
// there crosses a document (on the CPU, where asking is cheap; packed long documents seldom do);
// the keys of the block's own rows always (the causal triangle).
void mask_block(torch::Tensor& scores, const torch::Tensor& blocked, std::int64_t first) {
  const auto rows = scores.size(2);
  const auto minus_inf = -std::numeric_limits<double>::infinity();
  if (first == 0 || !scores.is_cpu()) {
    scores.masked_fill_(blocked.narrow(3, 0, first + rows), minus_inf);
    return;
  }
  scores.narrow(3, first, rows).masked_fill_(blocked.narrow(3, first, rows), minus_inf);
  const auto earlier = blocked.narrow(3, 0, first);
  if (earlier.any().item<bool>()) scores.narrow(3, 0, first).masked_fill_(earlier, minus_inf);
}

// The dtype the products run in: autocast's for q's device where it is on, else q, k and v's.
torch::ScalarType compute_dtype(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v) {
  if ((q.is_cpu() || q.is_cuda()) && ops::autocast_on(q.device().type()))
    return ops::autocast_dtype(q.device().type());
  return c10::promoteTypes(c10::promoteTypes(q.scalar_type(), k.scalar_type()), v.scalar_type());
}

struct causal_attention_function : torch::autograd::Function<causal_attention_function> {
  // q is (b, kv, group, s, hd), k and v (b, kv, s, hd); returns (b, s, kv, group, hd): the
  // layout o_proj reads as (b, s, heads * hd) without a copy.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& allowed) {
    const auto batch = q.size(0), kv = q.size(1), group = q.size(2), seq = q.size(3);
    const double scale = 1.0 / std::sqrt(double(q.size(4)));
    // One dtype for every product, forward and backward: autocast's where it is on (it is
    // kept out of the ops below, so the backward computes as the forward did).
    const auto dtype = compute_dtype(q, k, v);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    // the scale on q (hd columns, not keys), into a contiguous copy in one pass
    auto scaled = torch::empty(q.sizes(), q.options().dtype(dtype));
    at::mul_out(scaled, q, torch::scalar_tensor(scale, torch::kFloat64));
    const auto k_rows = k.to(dtype).contiguous(), v_rows = v.to(dtype).contiguous();
    const auto blocked = allowed.logical_not();
    auto out_tokens = torch::empty({batch, seq, kv, group, q.size(4)}, scaled.options());
    auto out = out_tokens.permute({0, 2, 3, 1, 4});  // (b, kv, group, s, hd)
    variable_list saved{scaled, k_rows, v_rows};
    const auto rows_per_block = block_rows(seq);
    for (std::int64_t first = 0; first < seq; first += rows_per_block) {
      const auto rows = std::min(rows_per_block, seq - first), keys = first + rows;
      auto keys_k = k_rows.narrow(2, 0, keys), keys_v = v_rows.narrow(2, 0, keys);
      auto scores = torch::matmul(query_block(scaled, first, rows), keys_k.transpose(-2, -1))
                        .view({batch, kv * group, rows, keys});
      mask_block(scores, blocked.narrow(2, first, rows), first);
      // softmax in fp32 at least (bf16 scores lose the small probabilities); kept for backward
      auto probs =
          torch::softmax(scores, -1, c10::promoteTypes(scores.scalar_type(), torch::kFloat32));
      saved.push_back(probs);
      out.narrow(3, first, rows)
          .copy_(torch::matmul(probs.to(dtype).view({batch, kv, group * rows, keys}), keys_v)
                     .view({batch, kv, group, rows, -1}));
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["scale"] = scale;
    return out_tokens;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    const auto& scaled = saved[0];
    const auto& k = saved[1];
    const auto& v = saved[2];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto batch = scaled.size(0), kv = scaled.size(1), group = scaled.size(2),
               seq = scaled.size(3);
    const auto grad_out = grads[0].permute({0, 2, 3, 1, 4});  // (b, kv, group, s, hd)
    auto dq = torch::empty_like(scaled);
    auto dk = torch::zeros_like(k), dv = torch::zeros_like(v);  // contiguous, as saved
    const auto rows_per_block = block_rows(seq);
    std::size_t block = 0;
    for (std::int64_t first = 0; first < seq; first += rows_per_block, ++block) {
      const auto rows = std::min(rows_per_block, seq - first), keys = first + rows;
      const auto& probs = saved[3 + block];  // (b, kv * group, rows, keys), fp32 at least
      const auto p = probs.to(scaled.scalar_type()).view({batch, kv, group * rows, keys});
      const auto g = query_block(grad_out, first, rows);  // (b, kv, group * rows, hd)
      dv.narrow(2, 0, keys).add_(torch::matmul(p.transpose(-2, -1), g));
      auto dp = torch::matmul(g, v.narrow(2, 0, keys).transpose(-2, -1))
                    .view({batch, kv * group, rows, keys});
      // Masked scores have probability 0, so their gradient is 0 here: no mask needed.
      auto ds =
          torch::_softmax_backward_data(dp.to(probs.scalar_type()), probs, -1, probs.scalar_type())
              .to(scaled.scalar_type())
              .view({batch, kv, group * rows, keys});
      dq.narrow(3, first, rows)
          .copy_(torch::matmul(ds, k.narrow(2, 0, keys)).view({batch, kv, group, rows, -1}));
      dk.narrow(2, 0, keys)
          .add_(torch::matmul(ds.transpose(-2, -1), query_block(scaled, first, rows)));
    }
    dq.mul_(scale);
    return {dq, dk, dv, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& allowed) {
  const auto batch = q.size(0), heads = q.size(1), seq = q.size(2), hd = q.size(3);
  const auto kv = k.size(1);
#if TORCH_VERSION_MAJOR >= 2
  // On a GPU with LibTorch 2.x: PyTorch's fused attention. With a boolean mask (the documents)
  // it runs the memory-efficient kernel, which keeps no (s, s) scores per head (PyTorch makes
  // one additive mask of the batch's (s, s) from the boolean one); k and v are repeated to the
  // query heads since that kernel has no grouped-query form.
  if (q.is_cuda()) {
    const auto dtype = compute_dtype(q, k, v);
    const auto group = heads / kv;
    const auto per_head = [&](const torch::Tensor& t) {
      return group == 1 ? t.to(dtype) : t.to(dtype).repeat_interleave(group, 1);
    };
    return at::scaled_dot_product_attention(q.to(dtype), per_head(k), per_head(v), allowed);
  }
#endif
  // fp32 on the CPU: the kernel, given token-major q, k and v (the projections' layout)
  const auto q_tokens = q.transpose(1, 2), k_tokens = k.transpose(1, 2),
             v_tokens = v.transpose(1, 2);
  if (compute_dtype(q, k, v) == torch::kFloat32 &&
      ops::causal_attention_cpu_takes(q_tokens, k_tokens, v_tokens)) {
    if (const auto keys = ops::causal_key_ranges(allowed))
      return ops::causal_attention_cpu(q_tokens, k_tokens, v_tokens, *keys).transpose(1, 2);
  }
  auto q5 = q.reshape({batch, kv, heads / kv, seq, hd});
  auto out = causal_attention_function::apply(q5, k, v, allowed);  // (b, s, kv, group, hd)
  return out.view({batch, seq, heads, hd}).transpose(1, 2);
}

}  // namespace muster::engine::model

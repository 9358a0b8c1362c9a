// The router over the router kernel: see router_op.hpp.
#include "engine/ops/router_op.hpp"

#include <ATen/Parallel.h>

#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/router.hpp"

namespace muster::engine::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Tokens per task when the rows are split over threads.
constexpr std::int64_t kGrainTokens = 64;

kernels::router_shape shape_of(const torch::Tensor& logits, std::int64_t tokens, int topk,
                               bool sigmoid, bool renormalize) {
  kernels::router_shape s;
  s.num_tokens = tokens;
  s.num_experts = logits.size(1);
  s.topk = topk;
  s.score = sigmoid ? kernels::router_score::sigmoid : kernels::router_score::softmax;
  s.renormalize = renormalize;
  return s;
}

struct router_function : torch::autograd::Function<router_function> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits, int64_t topk,
                               bool sigmoid, bool renormalize) {
    const auto tokens = logits.size(0), num_experts = logits.size(1);
    auto scores = torch::empty_like(logits);
    auto experts = torch::empty({tokens, topk}, logits.options().dtype(torch::kInt64));
    auto weights = torch::empty({tokens, topk}, logits.options());
    kernels::check_router_shape(shape_of(logits, tokens, int(topk), sigmoid, renormalize));
    const float* x = logits.data_ptr<float>();
    float *p = scores.data_ptr<float>(), *w = weights.data_ptr<float>();
    auto* e = experts.data_ptr<std::int64_t>();
    if (logits.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
      kernels::cuda::router_forward(x, p, e, w,
                                    shape_of(logits, tokens, int(topk), sigmoid, renormalize),
                                    kernel_stream(logits));
#endif
    } else {
      at::parallel_for(0, tokens, kGrainTokens, [&](std::int64_t begin, std::int64_t end) {
        kernels::cpu::router_forward(
            x + begin * num_experts, p + begin * num_experts, e + begin * topk, w + begin * topk,
            shape_of(logits, end - begin, int(topk), sigmoid, renormalize));
      });
    }
    ctx->save_for_backward({scores, experts});
    ctx->saved_data["topk"] = topk;
    ctx->saved_data["sigmoid"] = sigmoid;
    ctx->saved_data["renormalize"] = renormalize;
    ctx->mark_non_differentiable({experts});
    return {scores, experts, weights};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& scores = saved[0];
    const auto& experts = saved[1];
    const auto topk = ctx->saved_data["topk"].toInt();
    const bool sigmoid = ctx->saved_data["sigmoid"].toBool();
    const bool renormalize = ctx->saved_data["renormalize"].toBool();
    const auto tokens = scores.size(0), num_experts = scores.size(1);
    const auto grad_scores = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const auto grad_weights =
        grads[2].defined() ? grads[2].contiguous() : torch::zeros({tokens, topk}, scores.options());
    auto grad_logits = torch::empty_like(scores);
    const float* p = scores.data_ptr<float>();
    const auto* e = experts.data_ptr<std::int64_t>();
    const float* gw = grad_weights.data_ptr<float>();
    const float* gs = grad_scores.defined() ? grad_scores.data_ptr<float>() : nullptr;
    float* dx = grad_logits.data_ptr<float>();
    if (scores.is_cuda()) {
#ifdef MUSTER_WITH_CUDA
      kernels::cuda::router_backward(p, e, gw, gs, dx,
                                     shape_of(scores, tokens, int(topk), sigmoid, renormalize),
                                     kernel_stream(scores));
#endif
      return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    at::parallel_for(0, tokens, kGrainTokens, [&](std::int64_t begin, std::int64_t end) {
      kernels::cpu::router_backward(p + begin * num_experts, e + begin * topk, gw + begin * topk,
                                    gs ? gs + begin * num_experts : nullptr,
                                    dx + begin * num_experts,
                                    shape_of(scores, end - begin, int(topk), sigmoid, renormalize));
    });
    return {grad_logits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

router_outputs route_topk(const torch::Tensor& logits, int topk, bool sigmoid, bool renormalize) {
  const auto on_device = on_device_of(logits);
  if (!(cpu_kernel_takes(logits) || cuda_kernel_takes(logits)) || logits.dim() != 2) {
    auto scores = sigmoid ? torch::sigmoid(logits) : torch::softmax(logits, -1);
    auto [top, chosen] = scores.topk(topk, -1);
    if (renormalize) top = top / top.sum(-1, /*keepdim=*/true);
    return {scores, chosen, top};
  }
  auto out = router_function::apply(logits, topk, sigmoid, renormalize);
  return {out[0], out[1], out[2]};
}

}  // namespace muster::engine::ops

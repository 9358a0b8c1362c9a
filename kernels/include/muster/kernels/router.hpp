// The MoE router: from each token's logits over the experts, its scores (softmax, or sigmoid as
// DeepSeek-V3 routes), the top-k experts and their weights (renormalised to sum to 1 when
// asked), in one pass per token; and the backward from the weights' gradient to the logits'.
// Torch takes a pass and a temporary for each of softmax, topk, the sum and the division, and
// more in the backward. Raw pointers, row-major, sizes; no CUDA or torch types.
//
// Contract (both backends):
// - logits, scores: (num_tokens, num_experts) fp32; experts, weights: (num_tokens, topk).
// - A token's experts are in descending score, ties to the lower expert id. A NaN logit gives
//   NaN scores; the experts chosen are then ids in range, each once, which ones is not
//   specified, and so are the weights (the CPU gives NaN, the GPU may give 0 for a NaN
//   score); other tokens are not touched.
// - 1 <= topk <= num_experts <= kRouterMaxExperts; topk <= kRouterMaxTopk. The launchers check
//   these and throw std::invalid_argument naming the bad value.
// - The backward reads the forward's scores and experts and the gradients of both outputs
//   (grad_scores may be null: the scores were used only through the weights), and writes
//   every element of grad_logits.
#pragma once

#include <cstdint>

namespace muster::kernels {

inline constexpr std::int64_t kRouterMaxExperts = 1024;
inline constexpr int kRouterMaxTopk = 32;

enum class router_score { softmax, sigmoid };

struct router_shape {
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  int topk = 1;
  router_score score = router_score::softmax;
  bool renormalize = false;  // weights = top scores / their sum
};

// Throws std::invalid_argument when `shape` breaks the contract above.
void check_router_shape(const router_shape& shape);

namespace cpu {

// scores = softmax or sigmoid of logits; experts/weights = each token's top-k (see above).
void router_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& shape);

// grad_logits from grad_weights (num_tokens, topk), through the renormalisation (when on),
// plus grad_scores (num_tokens, num_experts; null: none), through the score function.
void router_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& shape);

}  // namespace cpu

namespace cuda {

// The same on the GPU: device pointers, enqueued on `stream` (a cudaStream_t; nullptr: the
// default stream). Built only with CUDA (MUSTER_WITH_CUDA); see kernels/cuda/router.cu.
void router_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& shape, void* stream);
void router_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& shape,
                     void* stream);

}  // namespace cuda
}  // namespace muster::kernels

// The MoE router's scores and top-k as one autograd function over the router kernel
// (kernels/include/muster/kernels/router.hpp): one pass per token forward, one backward that
// takes both the weights' gradient and the scores' (the balance loss reads the scores).
// Contiguous fp32 CPU logits take the kernel (tokens split over LibTorch's intra-op threads);
// contiguous fp32 CUDA logits take kernels::cuda on LibTorch's current stream; anything else
// takes torch's softmax or sigmoid, topk and division.
#pragma once

#include <torch/torch.h>

namespace muster::engine::ops {

struct router_outputs {
  torch::Tensor scores;   // (T, E): softmax or sigmoid of the logits, with gradient
  torch::Tensor experts;  // (T, k) int64: each token's experts, best first (ties: lower id)
  torch::Tensor weights;  // (T, k): their scores, renormalised to sum 1 when asked; gradient
};

// logits: (T, E). topk <= E.
router_outputs route_topk(const torch::Tensor& logits, int topk, bool sigmoid, bool renormalize);

}  // namespace muster::engine::ops

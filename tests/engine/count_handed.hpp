// Counting the gradients autograd hands a leaf: the in-place products (engine/ops/grads_in_place)
// hand none, adding into the leaf's .grad themselves.
#pragma once

#include <torch/torch.h>

namespace muster::test {

// Adds one to `handed` each time autograd hands `leaf` a gradient. LibTorch 2.x runs a leaf's
// hooks with an undefined gradient when its node returned none (1.13 skips them), so only
// defined ones count.
inline void count_handed(const torch::Tensor& leaf, int& handed) {
  leaf.register_hook([&handed](const torch::Tensor& grad) {
    if (grad.defined()) ++handed;
  });
}

}  // namespace muster::test

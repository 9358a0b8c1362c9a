// The SwiGLU feed-forward block (Shazeer 2020) of Llama-family models: down(silu(gate(x)) *
// up(x)), no biases. Parameters as Hugging Face names them: gate_proj, up_proj (ffn x hidden),
// down_proj (hidden x ffn). A dense layer's MLP, one routed expert, or the shared expert.
#pragma once

#include <torch/torch.h>

namespace muster::engine::model {

class swiglu : public torch::nn::Module {
 public:
  swiglu(std::int64_t hidden, std::int64_t ffn);
  // x is (..., hidden)
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};

}  // namespace muster::engine::model

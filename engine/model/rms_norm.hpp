// RMSNorm (Zhang & Sennrich 2019) as Llama, Qwen and Mixtral use it: y = x / rms(x) * weight,
// computed in fp32 and returned in x's dtype. Parameter: weight (dim), initialised to 1.
#pragma once

#include <torch/torch.h>

namespace muster::engine::model {

class rms_norm : public torch::nn::Module {
 public:
  rms_norm(std::int64_t dim, double eps);
  // x is (..., dim)
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;

 private:
  double eps_;
};

}  // namespace muster::engine::model

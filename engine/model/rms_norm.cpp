// RMSNorm: see rms_norm.hpp.
#include "engine/model/rms_norm.hpp"

namespace muster::engine::model {

rms_norm::rms_norm(std::int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor rms_norm::forward(const torch::Tensor& x) {
  auto x32 = x.to(torch::kFloat32);
  auto normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

}  // namespace muster::engine::model

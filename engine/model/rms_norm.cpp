// RMSNorm: see rms_norm.hpp.
#include "engine/model/rms_norm.hpp"

#include "engine/ops/rms_norm_op.hpp"

namespace muster::engine::model {

rms_norm::rms_norm(std::int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor rms_norm::forward(const torch::Tensor& x) {
  return ops::rms_norm(x, weight, eps_);
}

}  // namespace muster::engine::model

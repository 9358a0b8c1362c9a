// SwiGLU: see swiglu.hpp.
#include "engine/model/swiglu.hpp"

#include "engine/ops/linear_op.hpp"
#include "engine/ops/swiglu_op.hpp"

namespace muster::engine::model {

namespace {
torch::nn::LinearOptions no_bias(std::int64_t in, std::int64_t out) {
  return torch::nn::LinearOptions(in, out).bias(false);
}
}  // namespace

swiglu::swiglu(std::int64_t hidden, std::int64_t ffn) {
  gate_proj = register_module("gate_proj", torch::nn::Linear(no_bias(hidden, ffn)));
  up_proj = register_module("up_proj", torch::nn::Linear(no_bias(hidden, ffn)));
  down_proj = register_module("down_proj", torch::nn::Linear(no_bias(ffn, hidden)));
}

torch::Tensor swiglu::forward(const torch::Tensor& x) {
  // gate and up from one product where their weights lie one after another (their FSDP unit)
  if (const auto gate_up = ops::joined_linear(x, {gate_proj, up_proj}); gate_up.defined())
    return ops::linear(ops::swiglu_rows(gate_up), down_proj);
  return ops::linear(ops::swiglu(ops::linear(x, gate_proj), ops::linear(x, up_proj)), down_proj);
}

}  // namespace muster::engine::model

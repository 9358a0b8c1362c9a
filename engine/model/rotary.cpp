// Rotary position embedding: see rotary.hpp.
#include "engine/model/rotary.hpp"

namespace muster::engine::model {

rotary_tables make_rotary(const torch::Tensor& positions, std::int64_t head_dim, double theta,
                          torch::Dtype dtype) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(positions.device());
  // inv_freq[i] = theta^(-2i / head_dim), i < head_dim / 2; in fp64 so long positions stay exact
  auto inv_freq = torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / double(head_dim));
  auto freqs = positions.to(torch::kFloat64).unsqueeze(-1) * inv_freq;  // (b, s, hd/2)
  auto angles = torch::cat({freqs, freqs}, -1);                         // (b, s, hd)
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1) over the halves of the head,
// with its own backward: rotate_half's transpose is cat(y2, -y1). The tables repeat their
// halves (make_rotary), so x2 * sin1 = x2 * sin2 and both products come from one x * sin.
// Generic autograd of the same would take a zeroed full-size gradient per half and a cat.
struct rotary_function : torch::autograd::Function<rotary_function> {
  static torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos,
                              const torch::Tensor& sin, int sign) {
    const auto half = x.size(-1) / 2;
    auto out = x * cos;
    const auto xs = x * sin;
    // first half -= sign * (x2 * sin), second half += sign * (x1 * sin)
    out.narrow(-1, 0, half).sub_(xs.narrow(-1, half, half), sign);
    out.narrow(-1, half, half).add_(xs.narrow(-1, 0, half), sign);
    return out;
  }
  // x is (batch, heads, seq, hd); cos and sin (batch, 1, seq, hd).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate(x, cos, sin, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {rotate(grads[0], saved[0], saved[1], -1), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor apply_rotary(const torch::Tensor& x, const rotary_tables& rope) {
  // broadcast over heads
  return rotary_function::apply(x, rope.cos.unsqueeze(1), rope.sin.unsqueeze(1));
}

}  // namespace muster::engine::model

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

torch::Tensor apply_rotary(const torch::Tensor& x, const rotary_tables& rope) {
  const auto half = x.size(-1) / 2;
  auto first = x.narrow(-1, 0, half), second = x.narrow(-1, half, half);
  auto rotated = torch::cat({-second, first}, -1);  // rotate_half
  auto cos = rope.cos.unsqueeze(1), sin = rope.sin.unsqueeze(1);  // broadcast over heads
  return x * cos + rotated * sin;
}

}  // namespace muster::engine::model

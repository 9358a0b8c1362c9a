// The experts' wgrad operands, zero-padded to aligned blocks: see wgrad_operands.hpp.
#include "engine/ops/wgrad_operands.hpp"

#include "common/error.hpp"

namespace muster::engine::ops {
namespace {

torch::Tensor padded_rows(const torch::Tensor& rows, const torch::Tensor& to, std::int64_t padded) {
  return torch::zeros({padded, rows.size(1)}, rows.options()).index_copy_(0, to, rows);
}

}  // namespace

wgrad_operands padded_by_expert(const torch::Tensor& dy, const torch::Tensor& x,
                                const std::vector<std::int64_t>& counts) {
  MUSTER_CHECK(dy.dim() == 2 && x.dim() == 2 && dy.is_contiguous() && x.is_contiguous() &&
                   dy.size(0) == x.size(0) && dy.device() == x.device() &&
                   dy.scalar_type() == x.scalar_type(),
               errc::internal,
               "padded_by_expert: dy and x must be contiguous matrices of one device and dtype "
               "with one row each per assignment");
  wgrad_operands out;
  std::int64_t padded = 0, total = 0;
  bool aligned = true;
  for (const auto c : counts) {
    out.first.push_back(padded);
    out.k.push_back((c + kColumnAlign - 1) / kColumnAlign * kColumnAlign);
    padded += out.k.back();
    total += c;
    aligned = aligned && c % kColumnAlign == 0;
  }
  MUSTER_CHECK(total == dy.size(0), errc::internal,
               "padded_by_expert: {} rows, the experts' counts add up to {}", dy.size(0), total);
  torch::NoGradGuard no_grad;
  if (aligned) {  // no padding (no rows at all, too)
    out.dy_t = dy.t().contiguous();
    out.x = x;
    return out;
  }
  // row i of expert e goes to row first[e] + i of the padded order
  auto options = torch::TensorOptions().dtype(torch::kLong);
  if (dy.is_cuda()) options = options.pinned_memory(true);
  auto to = torch::empty({total}, options);
  auto* at = to.data_ptr<std::int64_t>();
  for (std::size_t e = 0; e < counts.size(); ++e)
    for (std::int64_t i = 0; i < counts[e]; ++i) *at++ = out.first[e] + i;
  if (dy.is_cuda()) to = to.to(dy.device(), /*non_blocking=*/true);
  out.dy_t = padded_rows(dy, to, padded).t().contiguous();
  out.x = padded_rows(x, to, padded);
  return out;
}

}  // namespace muster::engine::ops

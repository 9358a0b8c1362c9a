// The experts' wgrad operands in aligned, zero-padded blocks: see wgrad_operands.hpp.
#include "engine/ops/wgrad_operands.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace muster::engine::ops {
namespace {

// dy^T with each expert's columns from first[e] and zeros after them
torch::Tensor padded_transpose(const torch::Tensor& dy, const std::vector<std::int64_t>& counts,
                               const std::vector<std::int64_t>& first, std::int64_t padded) {
  const auto total = dy.size(0);
  if (padded == total) return dy.t().contiguous();  // every count aligned (or no rows)
  // row i of expert e goes to row first[e] + i of the padded order
  auto options = torch::TensorOptions().dtype(torch::kLong);
  if (dy.is_cuda()) options = options.pinned_memory(true);
  auto to = torch::empty({total}, options);
  auto* at = to.data_ptr<std::int64_t>();
  for (std::size_t e = 0; e < counts.size(); ++e)
    for (std::int64_t i = 0; i < counts[e]; ++i) *at++ = first[e] + i;
  if (dy.is_cuda()) to = to.to(dy.device(), /*non_blocking=*/true);
  return torch::zeros({padded, dy.size(1)}, dy.options()).index_copy_(0, to, dy).t().contiguous();
}

}  // namespace

std::int64_t common_reduction(const std::vector<std::int64_t>& counts, std::int64_t out,
                              std::int64_t in) {
  std::int64_t total = 0, largest = 0, experts = 0;
  for (const auto c : counts) {
    total += c;
    largest = std::max(largest, c);
    experts += c > 0 ? 1 : 0;
  }
  if (experts < 2) return 0;
  const auto k = (largest + kCommonAlign - 1) / kCommonAlign * kCommonAlign;
  const auto extra = double(experts * k - total) * 2.0 * double(out) * double(in);
  return extra <= kCommonExtraFlops && experts * k <= kCommonRowsRatio * total ? k : 0;
}

wgrad_operands padded_by_expert(const torch::Tensor& dy, const torch::Tensor& x,
                                const std::vector<std::int64_t>& counts, std::int64_t common) {
  MUSTER_CHECK(dy.dim() == 2 && x.dim() == 2 && dy.is_contiguous() && x.is_contiguous() &&
                   dy.size(0) == x.size(0) && dy.device() == x.device() &&
                   dy.scalar_type() == x.scalar_type(),
               errc::internal,
               "padded_by_expert: dy and x must be contiguous matrices of one device and dtype "
               "with one row each per assignment");
  wgrad_operands out;
  std::int64_t padded = 0, total = 0;
  for (const auto c : counts) {
    MUSTER_CHECK(common == 0 || (common % kColumnAlign == 0 && c <= common), errc::internal,
                 "padded_by_expert: a common reduction of {} for a count of {}", common, c);
    out.first.push_back(padded);
    out.k.push_back(common > 0 && c > 0 ? common
                                        : (c + kColumnAlign - 1) / kColumnAlign * kColumnAlign);
    padded += out.k.back();
    total += c;
  }
  MUSTER_CHECK(total == dy.size(0), errc::internal,
               "padded_by_expert: {} rows, the experts' counts add up to {}", dy.size(0), total);
  torch::NoGradGuard no_grad;
  out.dy_t = padded_transpose(dy, counts, out.first, padded);
  // Experts from the first whose k rows would run past x's end read a copy of x from its
  // first row on, zero rows after, as far as the farthest reaches (any number of them may:
  // counts {3, 1} run 8 and 4 rows past x's 4).
  std::int64_t from = total, at = 0, reach = total;  // from: total where none runs past
  for (std::size_t e = 0; e < counts.size(); ++e) {
    if (at + out.k[e] > total && from == total) from = at;
    reach = std::max(reach, at + out.k[e]);
    at += counts[e];
  }
  if (from < total) {
    out.tail = torch::zeros({reach - from, x.size(1)}, x.options());
    out.tail.narrow(0, 0, total - from).copy_(x.narrow(0, from, total - from));
  }
  const auto row_bytes = x.size(1) * x.element_size();
  std::int64_t start = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    out.x_rows.push_back(start < from || !out.tail.defined()
                             ? static_cast<const char*>(x.data_ptr()) + start * row_bytes
                             : static_cast<const char*>(out.tail.data_ptr()) +
                                   (start - from) * row_bytes);
    start += counts[e];
  }
  return out;
}

}  // namespace muster::engine::ops

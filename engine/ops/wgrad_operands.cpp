// The experts' wgrad operands in aligned, zero-padded blocks: see wgrad_operands.hpp.
#include "engine/ops/wgrad_operands.hpp"

#include <algorithm>
#include <cstdint>

#include <ATen/Parallel.h>

#include "common/error.hpp"
#include "engine/ops/kernel_tensors.hpp"
#include "muster/kernels/gather_transpose.hpp"

namespace muster::engine::ops {
namespace {

// Columns of dy^T a CPU task builds.
constexpr std::int64_t kColumnGrain = 256;

// dy^T with each expert's columns from first[e] and zeros after them, in one pass (kernels/
// gather_transpose). The map of its columns to dy's rows is built here: on a GPU only where
// there is padding, sent from pinned memory without waiting for it; on the CPU always, so that
// threads can each take a range of columns.
torch::Tensor padded_transpose(const torch::Tensor& dy, const std::vector<std::int64_t>& counts,
                               const std::vector<std::int64_t>& first, std::int64_t padded) {
  const auto total = dy.size(0), width = dy.size(1);
  const kernels::gather_transpose_shape shape{total, width, padded,
                                              static_cast<int>(dy.element_size())};
  auto dy_t = torch::empty({width, padded}, dy.options());
  torch::Tensor map;  // none: column j is row j (every count aligned, or no rows)
  if (padded != total || !dy.is_cuda()) {
    auto options = torch::TensorOptions().dtype(torch::kInt32);
    if (dy.is_cuda()) options = options.pinned_memory(true);
    map = torch::full({padded}, -1, options);
    auto* to = map.data_ptr<std::int32_t>();
    std::int32_t row = 0;
    for (std::size_t e = 0; e < counts.size(); ++e)
      for (std::int64_t i = 0; i < counts[e]; ++i) to[first[e] + i] = row++;
  }
  if (!dy.is_cuda()) {
    const auto* src = dy.data_ptr();
    const auto* m = map.data_ptr<std::int32_t>();
    auto* dst = static_cast<char*>(dy_t.data_ptr());
    at::parallel_for(0, padded, kColumnGrain, [&](std::int64_t begin, std::int64_t end) {
      auto part = shape;
      part.dst_cols = end - begin;
      part.dst_ld = padded;
      kernels::cpu::gather_transpose(src, m + begin, part, dst + begin * dy.element_size());
    });
    return dy_t;
  }
#ifdef MUSTER_WITH_CUDA
  if (map.defined()) map = map.to(dy.device(), /*non_blocking=*/true);
  const auto device = on_device_of(dy);
  kernels::cuda::gather_transpose(dy.data_ptr(),
                                  map.defined() ? map.data_ptr<std::int32_t>() : nullptr, shape,
                                  dy_t.data_ptr(), kernel_stream(dy));
#endif
  return dy_t;
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
                                const std::vector<std::int64_t>& counts, std::int64_t common,
                                std::int64_t align, bool with_x_rows) {
  MUSTER_CHECK(dy.dim() == 2 && x.dim() == 2 && dy.is_contiguous() && x.is_contiguous() &&
                   dy.size(0) == x.size(0) && dy.device() == x.device() &&
                   dy.scalar_type() == x.scalar_type(),
               errc::internal,
               "padded_by_expert: dy and x must be contiguous matrices of one device and dtype "
               "with one row each per assignment");
  MUSTER_CHECK(!dy.is_cuda() || have_cuda_kernels(), errc::internal,
               "padded_by_expert: a CUDA tensor, and muster_kernels was built without CUDA");
  MUSTER_CHECK(dy.element_size() == 2 || dy.element_size() == 4, errc::internal,
               "padded_by_expert: {}-byte elements (fp32 or bf16 are taken)", dy.element_size());
  MUSTER_CHECK(dy.size(0) <= INT32_MAX, errc::internal,
               "padded_by_expert: {} rows, past the column map's int32", dy.size(0));
  MUSTER_CHECK(align > 0 && align % kColumnAlign == 0, errc::internal,
               "padded_by_expert: reductions aligned to {}, not a multiple of {}", align,
               kColumnAlign);
  wgrad_operands out;
  std::int64_t padded = 0, total = 0;
  for (const auto c : counts) {
    MUSTER_CHECK(common == 0 || (common % align == 0 && c <= common), errc::internal,
                 "padded_by_expert: a common reduction of {} for a count of {} (aligned to {})",
                 common, c, align);
    out.first.push_back(padded);
    out.k.push_back(common > 0 && c > 0 ? common : (c + align - 1) / align * align);
    padded += out.k.back();
    total += c;
  }
  MUSTER_CHECK(total == dy.size(0), errc::internal,
               "padded_by_expert: {} rows, the experts' counts add up to {}", dy.size(0), total);
  torch::NoGradGuard no_grad;
  out.dy_t = padded_transpose(dy, counts, out.first, padded);
  if (with_x_rows) read_x_rows(out, x, counts);
  return out;
}

void read_x_rows(wgrad_operands& ops, const torch::Tensor& x,
                 const std::vector<std::int64_t>& counts) {
  MUSTER_CHECK(ops.x_rows.empty() && ops.k.size() == counts.size(), errc::internal,
               "read_x_rows: x's rows read already, or operands of other counts");
  torch::NoGradGuard no_grad;
  const auto total = x.size(0);
  // Experts from the first whose k rows would run past x's end read a copy of x from its
  // first row on, zero rows after, as far as the farthest reaches (any number of them may:
  // counts {3, 1} run 8 and 4 rows past x's 4).
  std::int64_t from = total, at = 0, reach = total;  // from: total where none runs past
  for (std::size_t e = 0; e < counts.size(); ++e) {
    if (at + ops.k[e] > total && from == total) from = at;
    reach = std::max(reach, at + ops.k[e]);
    at += counts[e];
  }
  if (from < total) {
    ops.tail = torch::zeros({reach - from, x.size(1)}, x.options());
    ops.tail.narrow(0, 0, total - from).copy_(x.narrow(0, from, total - from));
  }
  const auto row_bytes = x.size(1) * x.element_size();
  std::int64_t start = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    ops.x_rows.push_back(start < from || !ops.tail.defined()
                             ? static_cast<const char*>(x.data_ptr()) + start * row_bytes
                             : static_cast<const char*>(ops.tail.data_ptr()) +
                                   (start - from) * row_bytes);
    start += counts[e];
  }
}

}  // namespace muster::engine::ops

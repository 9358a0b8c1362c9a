// The experts' rows transposed into aligned column blocks: see expert_columns.hpp.
#include "engine/ops/expert_columns.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace muster::engine::ops {

expert_columns transposed_by_expert(const torch::Tensor& rows,
                                    const std::vector<std::int64_t>& counts) {
  MUSTER_CHECK(rows.dim() == 2 && rows.is_contiguous(), errc::internal,
               "transposed_by_expert: rows must be a contiguous matrix");
  expert_columns out;
  std::int64_t padded = 0, total = 0;
  bool aligned = true;
  for (const auto c : counts) {
    out.first.push_back(padded);
    padded += (c + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
    total += c;
    aligned = aligned && c % kColumnAlign == 0;
  }
  MUSTER_CHECK(total == rows.size(0), errc::internal,
               "transposed_by_expert: {} rows, the experts' counts add up to {}", rows.size(0),
               total);
  torch::NoGradGuard no_grad;
  if (aligned) {  // no padding (no rows at all, too)
    out.t = rows.t().contiguous();
    return out;
  }
  // row p of the padded order: its expert's row, or (padding) the block's last row again
  auto options = torch::TensorOptions().dtype(torch::kLong);
  if (rows.is_cuda()) options = options.pinned_memory(true);
  auto index = torch::empty({padded}, options);
  auto* at = index.data_ptr<std::int64_t>();
  std::int64_t from = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    const auto end = e + 1 < counts.size() ? out.first[e + 1] : padded;
    for (std::int64_t p = out.first[e], j = 0; p < end; ++p, ++j)  // none for no rows
      at[p] = from + std::min(j, counts[e] - 1);
    from += counts[e];
  }
  if (rows.is_cuda()) index = index.to(rows.device(), /*non_blocking=*/true);
  out.t = rows.index_select(0, index).t().contiguous();
  return out;
}

}  // namespace muster::engine::ops

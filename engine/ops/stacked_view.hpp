// One (E, rows, cols) view over E equal tensors that lie at one stride in one storage: the
// experts' weights of a MoE layer in their FSDP unit (engine/parallel/flat_unit.hpp lays each
// expert's gate, up and down projections end to end, so each projection's weights are E
// matrices a fixed step apart), and their gradients likewise. One kernel over the view does
// what one kernel a tensor would (the casts of bf16 autocast, the gradients' accumulation).
// Also one (rows, cols) view over tensors of one width laid one after another (joined_rows):
// one product for several linear layers.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

// Whether t is defined, contiguous, of first's dtype and device, and starts `offset` elements
// after first in first's storage: the test every view below makes of each tensor it spans.
inline bool lies_after(const torch::Tensor& t, const torch::Tensor& first, std::int64_t offset) {
  return t.defined() && t.is_contiguous() && t.scalar_type() == first.scalar_type() &&
         t.device() == first.device() && t.storage().is_alias_of(first.storage()) &&
         t.storage_offset() == first.storage_offset() + offset;
}

// The view, or an undefined tensor where the tensors are not 2-D, contiguous, of one dtype,
// device and shape, in one storage at offsets o, o + s, o + 2s, ... with s >= one's elements.
// No autograd: the view is of the storage, not of the tensors.
inline torch::Tensor stacked_view(const std::vector<torch::Tensor>& ts) {
  if (ts.empty()) return {};
  const auto& first = ts.front();
  if (!first.defined() || first.dim() != 2 || !first.is_contiguous()) return {};
  const auto step = ts.size() > 1 ? ts[1].storage_offset() - first.storage_offset() : first.numel();
  if (step < first.numel()) return {};
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    if (!lies_after(t, first, std::int64_t(i) * step) || t.sizes() != first.sizes()) return {};
  }
  torch::NoGradGuard no_grad;
  return first.detach().as_strided({std::int64_t(ts.size()), first.size(0), first.size(1)},
                                   {step, first.size(1), 1}, first.storage_offset());
}

// Whether each group of `per` tensors of ts (ts[g * per] .. ts[g * per + per - 1]) is 2-D,
// contiguous, of one shape, dtype and device, and lies end to end in one storage: an expert's
// gate and up projections in its FSDP unit. Metadata only: no tensor is made.
inline bool end_to_end(const std::vector<torch::Tensor>& ts, int per) {
  if (per < 1 || ts.empty() || ts.size() % std::size_t(per) != 0) return false;
  for (std::size_t g = 0; g < ts.size(); g += std::size_t(per)) {
    const auto& first = ts[g];
    if (!first.defined() || first.dim() != 2 || !first.is_contiguous()) return false;
    for (std::size_t i = 1; i < std::size_t(per); ++i) {
      const auto& t = ts[g + i];
      if (!lies_after(t, first, std::int64_t(i) * first.numel()) || t.sizes() != first.sizes())
        return false;
    }
  }
  return true;
}

// stacked_view over groups of `per` tensors end to end (end_to_end): one (G, per * rows, cols)
// view where the groups lie at one stride, else undefined.
inline torch::Tensor stacked_view(const std::vector<torch::Tensor>& ts, int per) {
  if (per == 1) return stacked_view(ts);
  if (!end_to_end(ts, per)) return {};
  const auto& first = ts.front();
  const auto groups = std::int64_t(ts.size()) / per, block = per * first.numel();
  const auto step =
      groups > 1 ? ts[std::size_t(per)].storage_offset() - first.storage_offset() : block;
  if (step < block) return {};
  // every group's first tensor in the first's storage, of its shape, one step after the last
  for (std::int64_t g = 1; g < groups; ++g) {
    const auto& head = ts[std::size_t(g * per)];
    if (!lies_after(head, first, g * step) || head.sizes() != first.sizes()) return {};
  }
  torch::NoGradGuard no_grad;
  return first.detach().as_strided({groups, per * first.size(0), first.size(1)},
                                   {step, first.size(1), 1}, first.storage_offset());
}

// One (rows of all, cols) view over 2-D tensors that lie one after another in one storage, each
// contiguous, of one width, dtype and device: the q, k and v projections' weights (or a
// SwiGLU's gate and up) in their FSDP unit, and their gradients likewise; else undefined.
// No autograd: the view is of the storage, not of the tensors.
inline torch::Tensor joined_rows(const std::vector<torch::Tensor>& ts) {
  if (ts.empty()) return {};
  const auto& first = ts.front();
  if (!first.defined() || first.dim() != 2 || !first.is_contiguous()) return {};
  std::int64_t rows = 0;
  for (const auto& t : ts) {
    if (!lies_after(t, first, rows * first.size(1)) || t.dim() != 2 || t.size(1) != first.size(1))
      return {};
    rows += t.size(0);
  }
  torch::NoGradGuard no_grad;
  return first.detach().as_strided({rows, first.size(1)}, {first.size(1), 1},
                                   first.storage_offset());
}

}  // namespace muster::engine::ops

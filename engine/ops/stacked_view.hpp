// One (E, rows, cols) view over E equal tensors that lie at one stride in one storage: the
// experts' weights of a MoE layer in their FSDP unit (engine/parallel/flat_unit.hpp lays each
// expert's gate, up and down projections end to end, so each projection's weights are E
// matrices a fixed step apart), and their gradients likewise. One kernel over the view does
// what one kernel a tensor would (the casts of bf16 autocast, the gradients' accumulation).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::ops {

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
    if (!t.defined() || !t.is_contiguous() || t.sizes() != first.sizes() ||
        t.scalar_type() != first.scalar_type() || t.device() != first.device() ||
        !t.storage().is_alias_of(first.storage()) ||
        t.storage_offset() != first.storage_offset() + std::int64_t(i) * step)
      return {};
  }
  torch::NoGradGuard no_grad;
  return first.detach().as_strided({std::int64_t(ts.size()), first.size(0), first.size(1)},
                                   {step, first.size(1), 1}, first.storage_offset());
}

// Each group of `per` tensors of ts (in order: ts[g * per] .. ts[g * per + per - 1]) as one
// (per * rows, cols) view of their storage, where they are 2-D, contiguous, of one shape,
// dtype and device, and lie end to end: an expert's gate and up projections in its FSDP unit.
// Empty where any group does not. No autograd, as stacked_view.
inline std::vector<torch::Tensor> end_to_end(const std::vector<torch::Tensor>& ts, int per) {
  if (per < 1 || ts.empty() || ts.size() % std::size_t(per) != 0) return {};
  std::vector<torch::Tensor> out;
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < ts.size(); g += std::size_t(per)) {
    const auto& first = ts[g];
    if (!first.defined() || first.dim() != 2 || !first.is_contiguous()) return {};
    for (std::size_t i = 1; i < std::size_t(per); ++i) {
      const auto& t = ts[g + i];
      if (!t.defined() || !t.is_contiguous() || t.sizes() != first.sizes() ||
          t.scalar_type() != first.scalar_type() || t.device() != first.device() ||
          !t.storage().is_alias_of(first.storage()) ||
          t.storage_offset() != first.storage_offset() + std::int64_t(i) * first.numel())
        return {};
    }
    out.push_back(first.detach().as_strided({per * first.size(0), first.size(1)},
                                            {first.size(1), 1}, first.storage_offset()));
  }
  return out;
}

}  // namespace muster::engine::ops

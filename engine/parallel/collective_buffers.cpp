// Buffers kept for a group's collectives: see collective_buffers.hpp.
#include "engine/parallel/collective_buffers.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace muster::engine::parallel {

collective_buffers::collective_buffers(std::shared_ptr<comm::communicator> group, bool keep_always)
    : group_(std::move(group)) {
  MUSTER_CHECK(group_ != nullptr, errc::internal, "collective buffers without a group");
  keep_ = keep_always || group_->registers_buffers();
}

torch::Tensor collective_buffers::take(std::int64_t numel, const torch::TensorOptions& options) {
  if (!keep_) {
    ++made_;
    ++unkept_in_use_;
    return group_->collective_buffer(numel, options);
  }
  const auto dtype = c10::typeMetaToScalarType(options.dtype());
  const auto bytes = numel * static_cast<std::int64_t>(c10::elementSize(dtype));
  const auto device = options.device().type();
  const auto on_device = [&](const torch::Tensor& b) { return b.device().type() == device; };
  // the smallest free block that holds it
  auto fits = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (on_device(*it) && it->numel() >= bytes &&
        (fits == free_.end() || it->numel() < fits->numel()))
      fits = it;
  torch::Tensor block;
  if (fits != free_.end()) {
    block = std::move(*fits);
    free_.erase(fits);
  } else {
    // none: the largest free block on the device is too small; its memory goes first
    auto largest = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (on_device(*it) && (largest == free_.end() || it->numel() > largest->numel()))
        largest = it;
    if (largest != free_.end()) {
      bytes_ -= largest->numel();
      free_.erase(largest);
    }
    block =
        group_->collective_buffer(std::max<std::int64_t>(bytes, 1), options.dtype(torch::kUInt8));
    ++made_;
    bytes_ += block.numel();
  }
  auto buffer = block.narrow(0, 0, bytes).view(dtype);
  used_.emplace(buffer.data_ptr(), std::move(block));
  return buffer;
}

void collective_buffers::give_back(torch::Tensor buffer) {
  if (!keep_) {
    MUSTER_CHECK(buffer.defined() && unkept_in_use_ > 0, errc::internal,
                 "a collective buffer given back that was not taken");
    --unkept_in_use_;
    return;
  }
  const auto it = buffer.defined() ? used_.find(buffer.data_ptr()) : used_.end();
  MUSTER_CHECK(it != used_.end(), errc::internal,
               "a collective buffer given back that was not taken");
  free_.push_back(std::move(it->second));
  used_.erase(it);
}

}  // namespace muster::engine::parallel

// Buffers kept for a group's collectives: see collective_buffers.hpp.
#include "engine/parallel/collective_buffers.hpp"

#include "common/error.hpp"

namespace muster::engine::parallel {

collective_buffers::collective_buffers(std::shared_ptr<comm::communicator> group)
    : group_(std::move(group)) {
  MUSTER_CHECK(group_ != nullptr, errc::internal, "collective buffers without a group");
}

collective_buffers::key collective_buffers::key_of(std::int64_t numel,
                                                   const torch::TensorOptions& options) {
  return {numel, static_cast<int>(c10::typeMetaToScalarType(options.dtype())),
          static_cast<int>(options.device().type())};
}

torch::Tensor collective_buffers::take(std::int64_t numel, const torch::TensorOptions& options) {
  ++in_use_;
  auto& kept = free_[key_of(numel, options)];
  if (!kept.empty()) {
    auto buffer = std::move(kept.back());
    kept.pop_back();
    return buffer;
  }
  auto buffer = group_->collective_buffer(numel, options);
  ++made_;
  bytes_ += buffer.nbytes();
  return buffer;
}

void collective_buffers::give_back(torch::Tensor buffer) {
  MUSTER_CHECK(buffer.defined() && in_use_ > 0, errc::internal,
               "a collective buffer given back that was not taken");
  --in_use_;
  free_[key_of(buffer.numel(), buffer.options())].push_back(std::move(buffer));
}

}  // namespace muster::engine::parallel

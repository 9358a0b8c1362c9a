// The FSDP units' transient buffers for one group's collectives (the gathered parameters, the
// whole gradients and their reduce-scatter), kept and reused rather than made at every gather:
// each comes from the group's collective_buffer(), so under comm.nccl_ub it is an NCCL user
// buffer registered once (ncclMemAlloc + ncclCommRegister cost far more than a collective),
// and a unit gathers straight into it. Buffers are kept by exact size and dtype: the units of
// one group are few sizes (every layer's are alike), so the buffers made are, per size, the
// most that were in use at once: the double buffers of Megatron-FSDP, found rather than fixed.
// Not thread-safe: one rank's units use it from the training thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"

namespace muster::engine::parallel {

class collective_buffers {
 public:
  // `group` makes the buffers; it must outlive them (and so this).
  explicit collective_buffers(std::shared_ptr<comm::communicator> group);

  // A flat buffer of `numel` elements of `options`' dtype and device, contents undefined: one
  // given back earlier, else a new collective_buffer(). Hand it back with give_back() once no
  // collective or kernel enqueued from now on uses it (the stream order covers those already
  // enqueued: a collective into it waits for the caller's stream).
  torch::Tensor take(std::int64_t numel, const torch::TensorOptions& options);
  void give_back(torch::Tensor buffer);

  std::int64_t bytes() const { return bytes_; }   // of every buffer made, in use or not
  std::int64_t made() const { return made_; }     // collective_buffer() calls
  std::int64_t in_use() const { return in_use_; } // buffers taken and not given back

 private:
  // numel, dtype, device type (a group's buffers are all on its one device)
  using key = std::tuple<std::int64_t, int, int>;
  static key key_of(std::int64_t numel, const torch::TensorOptions& options);

  std::shared_ptr<comm::communicator> group_;
  std::map<key, std::vector<torch::Tensor>> free_;
  std::int64_t bytes_ = 0, made_ = 0, in_use_ = 0;
};

}  // namespace muster::engine::parallel

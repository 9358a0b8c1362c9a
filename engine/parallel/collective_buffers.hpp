// The FSDP units' transient buffers for one group's collectives (the gathered parameters, the
// whole gradients in the wire's dtype), from the group's collective_buffer(), so a unit gathers
// and reduces straight in them.
//
// Kept or not: where the group registers its buffers (comm.nccl_ub: ncclMemAlloc +
// ncclCommRegister cost far more than a collective) they are kept and reused, registered once,
// as Megatron-FSDP keeps its double buffers; else each is made when taken and freed when given
// back, so the allocator's cache reuses the memory for anything (activations too) and nothing
// is held between gathers.
//
// Kept blocks are bytes, handed out as a buffer of any dtype and size they hold: a request
// takes the smallest free block that holds it; when none does, the largest free block (too
// small) is released first and a block of the request's size is made. So there are never more
// blocks than buffers in use at once, each the size of the largest buffer it served: units of
// different sizes (a large embedding beside the layers) share blocks rather than keeping a set
// per size.
// Not thread-safe: one rank's units use it from the training thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"

namespace muster::engine::parallel {

class collective_buffers {
 public:
  // `group` makes the buffers; it must outlive them (and so this). Blocks are kept where the
  // group registers its buffers, or always with keep_always (the pool's own tests on Gloo).
  explicit collective_buffers(std::shared_ptr<comm::communicator> group, bool keep_always = false);

  // A flat buffer of `numel` elements of `options`' dtype and device, contents undefined: a
  // view of a kept block, or a new collective_buffer(). Hand it back with give_back() once
  // no collective or kernel enqueued from now on uses it (the stream order covers those already
  // enqueued: a collective into it waits for the caller's stream).
  torch::Tensor take(std::int64_t numel, const torch::TensorOptions& options);
  void give_back(torch::Tensor buffer);

  std::int64_t bytes() const { return bytes_; }  // of the blocks kept, in use or not
  std::int64_t made() const { return made_; }    // collective_buffer() calls
  std::int64_t in_use() const { return static_cast<std::int64_t>(used_.size()) + unkept_in_use_; }

 private:
  std::shared_ptr<comm::communicator> group_;
  bool keep_;
  std::vector<torch::Tensor> free_;            // uint8 blocks
  std::map<const void*, torch::Tensor> used_;  // a buffer's data pointer: its block
  std::int64_t bytes_ = 0, made_ = 0, unkept_in_use_ = 0;
};

}  // namespace muster::engine::parallel

// The collectives the engine uses, over one group of ranks: a small interface of our own, so
// the model and the sharding code never see which backend carries them (Gloo on the CPU here;
// NCCL in the GPU issue).
//
// Contract: every call is a collective. Every rank of the group makes the same calls in the
// same order, with the sizes each call names as equal the same on every rank. Calls block until
// the collective is done on this rank, at most the group's timeout; then they throw errc::comm
// with one c10d-style line naming the rank, the group, the op, its sequence number, its bytes,
// the limit (or, where it failed sooner, how long it waited), and the ranks that never reached
// that sequence number (laggards.hpp):
//   [rank 1/2 group world] all_reduce seq=7 bytes=4096 timed out after 2000 ms; not arrived: rank 0
//   (at seq 6) (<the backend's error>)
// After such an error the group is broken: end the rank (its destructor does not wait for the
// peers that never came). Tensors are contiguous and on the CPU; bf16 travels as fp32 (Gloo in
// LibTorch 1.13 has no bf16) and comes back as bf16.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace muster::engine::comm {

// A collective started on this rank and not yet waited for (c10d's Work).
class pending_collective {
 public:
  virtual ~pending_collective() = default;
  // Blocks until the collective is done on this rank, at most the group's timeout; throws as
  // the blocking calls do. Once it returned, the result is in the tensor the call was given.
  virtual void wait() = 0;
};

class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;  // in this group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  // Collectives this group has started (the next one's sequence number).
  virtual std::int64_t sequence() const = 0;

  // Sums `t` over the group, in place. Same shape on every rank.
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
  // The same, started and left running (on the backend's threads) while the caller goes on:
  // `t` must stay alive and be neither read nor written until wait() returned. Started in the
  // same order on every rank, like every collective; a handle destroyed unwaited leaves the
  // collective running and its tensor in use.
  virtual std::unique_ptr<pending_collective> all_reduce_sum_async(torch::Tensor& t) = 0;
  // Every rank's `shard` (same numel everywhere), flattened and concatenated in rank order,
  // into `out`: contiguous, size() * shard.numel() elements, any dtype (converted as copy_
  // does). A collective_buffer() of the shard's dtype on the group's device is written in
  // place; anything else goes through a copy.
  void all_gather_into(const torch::Tensor& shard, torch::Tensor& out);
  // The same, started and left running as all_reduce_sum_async is: `shard` must stay unwritten
  // and `out` unread until wait() returned (FSDP's prefetch of the next unit's parameters).
  virtual std::unique_ptr<pending_collective> all_gather_into_async(const torch::Tensor& shard,
                                                                    torch::Tensor& out) = 0;
  // `full` (same numel everywhere, divisible by size()) summed over the group; this rank's
  // contiguous 1/size() part of the sum into `out` (contiguous, that many elements; written
  // in place as all_gather_into's `out` is).
  void reduce_scatter_sum_into(const torch::Tensor& full, torch::Tensor& out);
  // The same, started and left running as all_reduce_sum_async is: `full` must stay unwritten
  // and `out` unread until wait() returned (FSDP's reduction of one unit's gradients while the
  // backward of the units below goes on).
  virtual std::unique_ptr<pending_collective> reduce_scatter_sum_into_async(
      const torch::Tensor& full, torch::Tensor& out) = 0;
  // The same into new flat tensors of the input's dtype and device.
  torch::Tensor all_gather(const torch::Tensor& shard);
  torch::Tensor reduce_scatter_sum(const torch::Tensor& full);
  // Rows of `input` (dim 0) go to the ranks in order, send_rows[r] of them to rank r; returns
  // the rows received, recv_rows[r] from rank r, in rank order. recv_rows must match what the
  // senders send (exchange the counts first, e.g. with exchange_counts()).
  virtual torch::Tensor all_to_all(const torch::Tensor& input,
                                   const std::vector<std::int64_t>& send_rows,
                                   const std::vector<std::int64_t>& recv_rows) = 0;
  // Rank `root`'s `t` into every rank's `t` (same shape everywhere).
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  virtual void barrier() = 0;

  // A group of some of this group's ranks (world ranks, ascending) on the same backend, named
  // `name` (unique in the job), made by every member with the same arguments (make_group()).
  virtual std::shared_ptr<communicator> subgroup(const std::string& name,
                                                 const std::vector<int>& ranks) = 0;

  // A flat buffer of `numel` elements (contents undefined) for this group's collectives (the
  // FSDP all-gather and reduce-scatter buffers): NCCL user buffers where the backend registers
  // them (comm.nccl_ub), else a plain tensor. Making one may be slow (registration): keep and
  // reuse it (parallel/collective_buffers.hpp). It must not outlive the group.
  virtual torch::Tensor collective_buffer(std::int64_t numel, const torch::TensorOptions& options) {
    return torch::empty({numel}, options);
  }
  // Whether collective_buffer() registers what it makes (NCCL user buffers): then buffers are
  // worth keeping; else the allocator's cache reuses freed memory, for activations too.
  virtual bool registers_buffers() const { return false; }

 protected:
  // For the backends' *_into: `out` must be contiguous with `numel` elements (errc::internal,
  // naming `op` and the sizes).
  void check_into(const char* op, const torch::Tensor& out, std::int64_t numel) const;
};

// What every rank will send to this one: each rank gives the counts it sends to every rank
// (size() of them); returns the counts each rank sends here (one all_to_all of int64).
std::vector<std::int64_t> exchange_counts(communicator& comm,
                                          const std::vector<std::int64_t>& send_counts);

struct world_options {
  std::chrono::milliseconds timeout{600000};          // every collective
  std::chrono::milliseconds connect_timeout{300000};  // all ranks reaching the store and
                                                      // connecting to each other (a rank's
                                                      // start may lag the others' by seconds)
};

// The group of every rank of the job, from torchrun's environment (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT): rank 0 serves the rendezvous store on MASTER_PORT. Throws
// errc::environment naming the variable that is missing or malformed.
std::shared_ptr<communicator> make_world(const world_options& options = {});

// A group of `ranks` (world ranks, ascending) named `name` (unique in the job), made by every
// member with the same arguments; `world` must be a group make_world() made.
std::shared_ptr<communicator> make_group(communicator& world, const std::string& name,
                                         const std::vector<int>& ranks);

}  // namespace muster::engine::comm

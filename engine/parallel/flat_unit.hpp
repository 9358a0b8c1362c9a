// One FSDP sharding unit: a set of parameters laid end to end in one flat fp32 buffer, padded
// to a multiple of the S ranks of its shard group; shard rank r holds elements
// [r*n/S, (r+1)*n/S) of it and the Adam state of just those. The units are the planner's
// (launcher/plan/model_params.hpp): the embedding, each layer's non-expert tensors, each MoE
// layer's routed experts, and the head.
//
// What each strategy keeps between steps, and what it reduces (gradients are sums: the loss is
// already divided by the global token count):
//   no_shard            params, grads, Adam state whole (S = 1); grads all-reduced at step end
//   optim               params and grads whole, Adam state sharded; grads reduce-scattered at
//                       step end into this rank's part of the grad buffer; the updated shards
//                       all-gathered back into the params
//   optim_grads         as optim, but the whole grads exist only during a unit's backward: they
//                       are reduce-scattered into a shard-sized buffer right after it
//   optim_grads_params  as optim_grads, and the params too: the whole buffer's storage exists
//                       only between gather() and release() (the storage is freed, not the
//                       tensor, so the views autograd saved in forward see the data gathered
//                       again for backward)
// The parameters stay the model's own tensors (leaves, as the modules hold them); only their
// data and grads become views of the unit's buffers. Every buffer a collective reads or writes
// is the group's collective_buffer() (NCCL user buffers under comm.nccl_ub): the persistent
// ones made so, the transient ones (gathered parameters, whole gradients, their copies in
// reduce_dtype) taken from collective_buffers and given back; a gather lands in place.
// Not here: when to gather and reduce (unit_hooks.hpp, sharded_model.hpp), the update
// (flat_adamw.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "engine/model/param_storage.hpp"

#include "engine/comm/communicator.hpp"
#include "engine/parallel/collective_buffers.hpp"
#include "launcher/plan/sharding.hpp"

namespace muster::engine::parallel {

using launcher::plan::parse_sharding;
using launcher::plan::sharding;

// Bytes of gathered parameters and whole gradients that exist at once, now and at most: what
// sharding adds to a rank's memory while it computes.
struct transient_meter {
  std::int64_t now = 0, peak = 0;
  void add(std::int64_t bytes) {
    now += bytes;
    peak = std::max(peak, now);
  }
};

struct unit_options {
  std::string name;  // "layers.3", "layers.3.experts", "embed_tokens", "head"
  sharding strategy = sharding::no_shard;
  // The ranks holding the same parameters, over which gradients are summed and (unless
  // no_shard) the unit is sharded; null: this rank alone.
  std::shared_ptr<comm::communicator> group;
  torch::ScalarType reduce_dtype = torch::kFloat32;  // gradients on the wire
  std::shared_ptr<transient_meter> meter;            // may be null
  // For parameters without values (model_config::shapes_only): fills one whole parameter with
  // its initial values; the unit keeps what falls in this rank's shard (model/init.hpp).
  std::function<void(const std::string& name, torch::Tensor& whole)> init;
  torch::Device device = torch::kCPU;  // where the buffers (so the parameters) live
  // The group's transient buffers, shared by its units; null: the unit keeps its own.
  std::shared_ptr<collective_buffers> buffers;
  // optim_grads and up: end_backward leaves the gradients' reduce-scatter running, for
  // finish_reduce (parallel.overlap_grad_reduce); false: it waits for it.
  bool overlap_reduce = false;
};

// Bytes of one kind of state.
struct held_bytes {
  std::int64_t params = 0, grads = 0, optimizer = 0;
};

class flat_unit {
 public:
  // `params`: (name, parameter) in order; their values move into the unit's buffer.
  flat_unit(unit_options options, std::vector<std::pair<std::string, torch::Tensor>> params);
  flat_unit(const flat_unit&) = delete;
  flat_unit& operator=(const flat_unit&) = delete;

  const std::string& name() const { return options_.name; }
  sharding strategy() const { return options_.strategy; }
  std::int64_t numel() const { return numel_; }        // n, the parameters' elements
  std::int64_t shard_numel() const { return shard_; }  // ceil(n / S)
  int shard_ranks() const { return ranks_; }           // S
  const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }

  // The parameters usable: optim_grads_params all-gathers them (or waits for the prefetch's
  // gather); otherwise nothing.
  void gather();
  // optim_grads_params starts the all-gather of gather() and leaves it running, for gather() to
  // wait for: the next unit's parameters travel while this one computes. Otherwise nothing.
  void prefetch();
  // optim_grads_params frees the gathered storage (waiting for a prefetch never used);
  // otherwise nothing.
  void release();
  bool gathered() const { return gathered_; }

  // Before the unit's backward: gradients land in a zeroed whole buffer (optim_grads and up; the
  // other strategies keep theirs for the whole step). Idempotent within one backward.
  void begin_backward();
  // After the unit's backward: optim_grads and up reduce-scatter the whole buffer into the
  // shard's gradient (adding, over micro-batches) and free it, or with overlap_reduce start
  // that and leave it to finish_reduce(); after the step's last backward (set_last_backward),
  // no_shard starts the all_reduce of its gradients, and optim with overlap_reduce the
  // reduce-scatter, and leaves it running while the backward of the units below goes on;
  // otherwise nothing. Idempotent.
  void end_backward();
  // Waits for a reduce-scatter end_backward left running, adds this rank's part to the shard's
  // gradient and gives the whole buffer back. Idempotent; begin_backward, zero_grad and
  // reduce_step_gradients call it first.
  void finish_reduce();
  void set_overlap_reduce(bool on) { options_.overlap_reduce = on; }
  // Whether the coming backward is the step's last (its last micro-batch).
  void set_last_backward(bool last) { last_backward_ = last; }
  // At the end of a step's backward passes: no_shard finishes the all_reduce of the gradients,
  // optim the reduce-scatter into this rank's part (each starting it if end_backward did not);
  // the others did it in end_backward().
  void reduce_step_gradients();
  void zero_grad();

  // This rank's shard of the parameters (fp32, flat) and its gradient: the optimizer's view.
  torch::Tensor& shard() { return shard_params_; }
  torch::Tensor& shard_grad() { return shard_grads_; }
  // Per element of the shard: 1 where weight decay applies, 0 for norms and biases (and padding).
  const torch::Tensor& decay_mask() const { return decay_mask_; }
  // After the optimizer changed the shard: optim and optim_grads all-gather it back into the
  // parameters.
  void after_update();

  // The group gradients are summed over (null: this rank alone).
  std::shared_ptr<comm::communicator> group() const { return options_.group; }

  // The unit's parameters whole (flat, padded): a collective over the group when they are
  // sharded (an all-gather into a new tensor; the unit stays as it was), else its buffer.
  torch::Tensor whole_values();
  // Sets the parameters from `whole` (flat, numel() or padded): this rank keeps its shard.
  void load_whole(const torch::Tensor& whole);
  // Whether this rank writes the unit into a checkpoint: one rank of its group, by `index`.
  bool writes(std::size_t index) const;
  // This rank's offset of each parameter in the flat buffer (params() order).
  const std::vector<std::int64_t>& offsets() const { return offsets_; }

  // The persistent bytes (between steps) of parameters and gradients, measured on the buffers.
  held_bytes held() const;

 private:
  // fp32 on the unit's device: every buffer of the unit.
  torch::TensorOptions f32() const {
    return torch::TensorOptions().dtype(torch::kFloat32).device(options_.device);
  }
  bool params_sharded() const { return options_.strategy == sharding::optim_grads_params; }
  bool grads_sharded() const {
    return options_.strategy == sharding::optim_grads ||
           options_.strategy == sharding::optim_grads_params;
  }
  int shard_rank() const;
  // Starts summing `whole` over the group in reduce_dtype; finish_reduce() adds this rank's part
  // to shard_grads_ (or copies it there: `add` false) and, `transient`, gives `whole` back.
  // Reduced in place: `whole` is scratch afterwards.
  void start_reduce(torch::Tensor whole, bool add, bool transient);
  // optim: the step's one reduce-scatter of the whole gradients, started once a step
  void start_step_reduce();
  // A zeroed fp32 buffer of the whole unit that collectives read and write in place.
  torch::Tensor persistent_buffer();
  void start_all_reduce();
  void point_grads_at(const torch::Tensor& buffer);
  void start_gather();
  void count(std::int64_t bytes) {
    if (options_.meter) options_.meter->add(bytes);
  }

  unit_options options_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<std::int64_t> offsets_;
  std::int64_t numel_ = 0, shard_ = 0;
  int ranks_ = 1;
  std::shared_ptr<collective_buffers> buffers_;  // null when this rank is alone
  // N = S * shard_ elements: a persistent buffer, or (optim_grads_params) a storage borrowed
  // from gather_buffer_ while gathered and freed while released
  torch::Tensor full_params_;
  torch::Tensor gather_buffer_;  // taken from buffers_ while gathered or prefetched
  std::unique_ptr<comm::pending_collective> pending_gather_;  // a prefetch's all-gather
  torch::Tensor full_grads_;    // N, or undefined between backwards when grads are sharded
  torch::Tensor shard_params_;  // view of full_params_, or its own buffer (optim_grads_params)
  torch::Tensor shard_grads_;
  torch::Tensor decay_mask_;
  bool gathered_ = true, in_backward_ = false, last_backward_ = false;
  // no_shard: the all_reduce of the step's gradients in flight, over wire_grads_ (full_grads_
  // itself, or its copy in reduce_dtype).
  std::unique_ptr<comm::pending_collective> all_reduce_;
  torch::Tensor wire_grads_;
  // optim and up: the reduce-scatter of start_reduce, until finish_reduce
  struct reduction {
    std::unique_ptr<comm::pending_collective> pending;
    torch::Tensor whole, sent, part;  // sent: whole, or its copy in reduce_dtype
    bool add = false, transient = false;
  } reduction_;
  bool step_reduce_started_ = false;
};

}  // namespace muster::engine::parallel

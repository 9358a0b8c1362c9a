// The transformer cut into the planner's sharding units (launcher/plan/model_params.hpp) and run
// layer by layer with the FSDP schedule of the chosen strategy (flat_unit.hpp):
//   forward   the embedding is gathered for its lookup; each layer's units (its non-expert
//             tensors and, for a MoE layer, its experts: one gather group) are gathered just
//             before the layer and released after it; the head is gathered and kept for its
//             backward, which comes next;
//   backward  each group is gathered again just before its backward and its gradients are
//             reduced (optim_grads and up: reduce-scattered) and released right after, so under
//             optim_grads_params a rank holds its shards plus one or two groups whole, not the
//             model. The embedding's gradient is reduced once backward returns (its lookup's
//             backward needs no parameters). With tie_embeddings the embedding, which the head
//             also uses, stays gathered from forward to the end of backward.
// Non-expert units are sharded over the data-parallel group, expert units over the
// expert-data-parallel group.
// Not here: the optimizer (flat_adamw.hpp), the loss and the step (engine/train/).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"
#include "engine/model/decoder.hpp"
#include "engine/parallel/flat_unit.hpp"
#include "engine/parallel/unit_hooks.hpp"

namespace muster::engine::parallel {

struct shard_groups {
  std::shared_ptr<comm::communicator> dense;   // data parallel: non-expert gradients
  std::shared_ptr<comm::communicator> expert;  // expert data parallel: expert gradients
  std::shared_ptr<comm::communicator> world;   // every rank (the gradient norm)
};

class sharded_model {
 public:
  // `init` fills parameters the model holds on the meta device (see unit_options::init).
  sharded_model(std::shared_ptr<model::transformer> model, shard_groups groups, sharding strategy,
                torch::ScalarType reduce_dtype = torch::kFloat32,
                std::function<void(const std::string&, torch::Tensor&)> init = nullptr,
                torch::Device device = torch::kCPU);

  // train.recompute = full: each decoder layer keeps only its input for backward and runs its
  // forward again there (model/recompute.hpp), inside its gather, so the layer's parameters are
  // gathered once for both.
  void set_recompute_layers(bool on) { recompute_layers_ = on; }
  // parallel.fsdp_prefetch: under optim_grads_params, start the next layer group's all-gather
  // (forward: the layer after; backward: the layer before) while the current one computes, so at
  // most two groups' parameters are gathered at once (the planner's double buffer).
  void set_prefetch(bool on);
  // parallel.overlap_grad_reduce: under optim_grads and optim_grads_params, each layer group's
  // gradient reduce-scatter runs while the group below computes its backward, and is finished
  // when that group's backward ends (the last ones at reduce_step_gradients): at most two
  // groups' whole gradients exist at once, as the planner counts.
  void set_overlap_grad_reduce(bool on);

  model::transformer_output forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                                    const torch::Tensor& segments);
  // Before each micro-batch: whether its backward is the step's last (no_shard then starts each
  // unit's all_reduce as soon as the unit's backward is done, overlapping the rest).
  void set_last_micro_batch(bool last);
  // After each micro-batch's backward: what autograd did not reach (the embedding).
  void finish_backward();
  // After the step's last backward: no_shard and optim reduce their whole gradients.
  void reduce_step_gradients();
  void zero_grad();

  std::vector<flat_unit*> units();
  comm::communicator* world() const { return groups_.world.get(); }
  model::transformer& model() { return *model_; }
  // Persistent parameter and gradient bytes of this rank (the optimizer's are flat_adamw's).
  held_bytes held() const;
  // Gathered parameters and whole gradients alive at once, now and at the most so far.
  const transient_meter& transient() const { return *meter_; }
  // Bytes of the groups' transient collective buffers (collective_buffers.hpp), kept between
  // steps: what they took at once at the most, per size.
  std::int64_t buffer_bytes() const;

 private:
  std::shared_ptr<model::transformer> model_;
  shard_groups groups_;
  std::shared_ptr<transient_meter> meter_ = std::make_shared<transient_meter>();
  std::map<const comm::communicator*, std::shared_ptr<collective_buffers>> buffers_;
  std::deque<flat_unit> units_;    // stable addresses: the groups point into it
  std::deque<unit_group> layers_;  // one per decoder layer
  unit_group embedding_, head_;
  reducing_group reducing_;  // the groups' shared slot under overlap_grad_reduce
  bool recompute_layers_ = false;
  bool prefetch_ = false;  // set by the trainer from parallel.fsdp_prefetch
  bool tied_ = false;
};

}  // namespace muster::engine::parallel

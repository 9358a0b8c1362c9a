// AdamW over the shards of the sharding units (flat_unit.hpp): each rank updates only its shard
// of every unit, with Adam moments of the shard's size, so the optimizer state is divided over
// the shard group. The update is torch.optim.AdamW's (decoupled weight decay, bias-corrected
// moments, eps added after the square root), with weight decay only where the unit's decay mask
// says (not on norms and biases).
// Also the gradient norm over every shard of every rank, for clipping.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "common/job_config.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/parallel/flat_unit.hpp"

namespace muster::engine::parallel {

class flat_adamw {
 public:
  flat_adamw(std::vector<flat_unit*> units, const train_section& train);
  // One update at learning rate `lr`, then each unit's after_update().
  void step(double lr);
  std::int64_t steps_taken() const { return steps_; }
  // The moments' bytes (the optimizer's persistent state on this rank).
  std::int64_t held_bytes() const;

  // Per unit, the moments of its shard (for checkpoints), and the step count they are at.
  struct state {
    torch::Tensor exp_avg, exp_avg_sq;
  };
  std::vector<state>& moments() { return state_; }
  void set_steps_taken(std::int64_t steps) { steps_ = steps; }

 private:
  std::vector<flat_unit*> units_;
  std::vector<state> state_;
  double beta1_, beta2_, eps_, weight_decay_;
  std::int64_t steps_ = 0;
};

// The L2 norm of all gradients of the model: each unit's shard gradient squared and summed in
// fp64, divided by the ranks holding a copy of that shard (its group's size / S: the group's
// other ranks hold other shards, ranks outside it other parameters, such as other EP ranks'
// experts), and summed over `world` (null: this rank alone) in one all_reduce.
double global_grad_norm(const std::vector<flat_unit*>& units, comm::communicator* world);

// Scales every shard gradient so the global norm is at most `max_norm` (as
// torch.nn.utils.clip_grad_norm_: by max_norm / (norm + 1e-6) when that is below 1); returns the
// norm before clipping. max_norm <= 0: no clipping.
double clip_grad_norm(const std::vector<flat_unit*>& units, comm::communicator* world,
                      double max_norm);

}  // namespace muster::engine::parallel

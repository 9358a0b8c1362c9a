// AdamW over shards and the global gradient norm: see flat_adamw.hpp.
#include "engine/parallel/flat_adamw.hpp"

#include <cmath>

#include "engine/ops/optimizer_ops.hpp"

namespace muster::engine::parallel {

flat_adamw::flat_adamw(std::vector<flat_unit*> units, const train_section& train)
    : units_(std::move(units)),
      beta1_(train.adam_beta1),
      beta2_(train.adam_beta2),
      eps_(train.adam_eps),
      weight_decay_(train.weight_decay) {
  for (auto* u : units_)
    state_.push_back({torch::zeros_like(u->shard()), torch::zeros_like(u->shard())});
}

void flat_adamw::step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const kernels::adamw_scalars scalars{lr, beta1_, beta2_, eps_, weight_decay_, steps_};
  for (std::size_t i = 0; i < units_.size(); ++i) {
    auto& [m, v] = state_[i];
    ops::adamw_update(scalars, units_[i]->shard(), units_[i]->shard_grad(), m, v,
                      weight_decay_ != 0 ? units_[i]->decay_mask() : torch::Tensor());
    units_[i]->after_update();
  }
}

std::int64_t flat_adamw::held_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& s : state_) bytes += s.exp_avg.nbytes() + s.exp_avg_sq.nbytes();
  return bytes;
}

double global_grad_norm(const std::vector<flat_unit*>& units, comm::communicator* world) {
  const int world_size = world ? world->size() : 1;
  double mine = 0, shared = 0;  // this rank's squares; divided by the copies of each
  bool replicated_everywhere = true;
  std::vector<torch::Tensor> grads;
  for (auto* u : units) grads.push_back(u->shard_grad());
  const auto squares_of = ops::sums_of_squares(grads);
  for (std::size_t i = 0; i < units.size(); ++i) {
    const auto* u = units[i];
    const int group = u->group() ? u->group()->size() : 1;
    replicated_everywhere = replicated_everywhere && group == world_size && u->shard_ranks() == 1;
    const double squares = squares_of[i];
    mine += squares;
    shared += squares * double(u->shard_ranks()) / double(group);
  }
  // Every rank holds every gradient whole: this rank's squares are everyone's.
  if (replicated_everywhere || !world) return std::sqrt(mine);
  auto t = torch::tensor({shared}, torch::kFloat64);
  world->all_reduce_sum(t);
  return std::sqrt(t.item<double>());
}

double clip_grad_norm(const std::vector<flat_unit*>& units, comm::communicator* world,
                      double max_norm) {
  const double norm = global_grad_norm(units, world);
  if (max_norm > 0) {
    const double coeff = max_norm / (norm + 1e-6);
    if (coeff < 1)
      for (auto* u : units) u->shard_grad().mul_(coeff);
  }
  return norm;
}

}  // namespace muster::engine::parallel

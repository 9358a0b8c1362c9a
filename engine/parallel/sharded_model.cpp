// The transformer run unit by unit: see sharded_model.hpp.
#include "engine/parallel/sharded_model.hpp"

#include <fmt/format.h>

#include "engine/model/recompute.hpp"

namespace muster::engine::parallel {
namespace {

using named = std::vector<std::pair<std::string, torch::Tensor>>;

}  // namespace

sharded_model::sharded_model(std::shared_ptr<model::transformer> model, shard_groups groups,
                             sharding strategy, torch::ScalarType reduce_dtype,
                             std::function<void(const std::string&, torch::Tensor&)> init,
                             torch::Device device)
    : model_(std::move(model)), groups_(std::move(groups)) {
  tied_ = !model_->lm_head;
  auto add = [&](std::string name, std::shared_ptr<comm::communicator> group, named params) {
    auto& buffers = buffers_[group.get()];  // used by the units only over several ranks
    if (!buffers && group) buffers = std::make_shared<collective_buffers>(group);
    units_.emplace_back(unit_options{std::move(name), strategy, std::move(group), reduce_dtype,
                                     meter_, init, device, buffers},
                        std::move(params));
    return &units_.back();
  };
  embedding_.units.push_back(
      add("embed_tokens", groups_.dense, {{"embed_tokens.weight", model_->embed_tokens->weight}}));
  embedding_.params_in_backward = tied_;
  for (std::size_t i = 0; i < model_->layers.size(); ++i) {
    named dense, experts;
    for (auto& p : model_->layers[i]->named_parameters()) {
      auto name = fmt::format("layers.{}.{}", i, p.key());
      (p.key().starts_with("mlp.experts.") ? experts : dense).emplace_back(name, p.value());
    }
    auto& group = layers_.emplace_back();
    group.units.push_back(add(fmt::format("layers.{}", i), groups_.dense, std::move(dense)));
    if (!experts.empty())
      group.units.push_back(
          add(fmt::format("layers.{}.experts", i), groups_.expert, std::move(experts)));
  }
  named head{{"norm.weight", model_->norm->weight}};
  if (!tied_) head.emplace_back("lm_head.weight", model_->lm_head->weight);
  head_.units.push_back(add("head", groups_.dense, std::move(head)));
}

void sharded_model::set_prefetch(bool on) {
  prefetch_ = on;
  // backward runs the head, then the layers from the last; the embedding needs its parameters
  // in backward only when tied, and then they stay gathered from forward
  head_.backward_next = on && !layers_.empty() ? &layers_.back() : nullptr;
  for (std::size_t i = 1; i < layers_.size(); ++i)
    layers_[i].backward_next = on ? &layers_[i - 1] : nullptr;
}

void sharded_model::set_overlap_grad_reduce(bool on) {
  for (auto& u : units_) u.set_overlap_reduce(on);
  for (auto* g : {&embedding_, &head_}) g->reducing = on ? &reducing_ : nullptr;
  for (auto& g : layers_) g.reducing = on ? &reducing_ : nullptr;
}

model::transformer_output sharded_model::forward(const torch::Tensor& tokens,
                                                 const torch::Tensor& positions,
                                                 const torch::Tensor& segments) {
  embedding_.gather();
  auto x = mark_outputs(&embedding_, {model_->embed(tokens)})[0];
  if (!tied_) embedding_.release();
  const auto ctx = model_->context(positions, segments, x.scalar_type());
  auto zero = torch::zeros({}, x.options().dtype(torch::kFloat32));
  model::transformer_output out{{}, {zero, zero}};
  for (std::size_t i = 0; i < model_->layers.size(); ++i) {
    auto& layer = *model_->layers[i];
    auto& group = layers_[i];
    x = mark_input(&group, x);
    group.gather();
    // the next group's parameters travel while this layer computes
    if (prefetch_) (i + 1 < layers_.size() ? layers_[i + 1] : head_).prefetch();
    // The layer's output and, for an MoE layer, its router losses; all new tensors (what
    // recompute needs of them).
    auto run_layer =
        [&layer, rope = ctx.rope, mask = ctx.mask](
            const torch::autograd::variable_list& in) -> torch::autograd::variable_list {
      auto none = torch::zeros({}, in[0].options().dtype(torch::kFloat32));
      model::moe_losses losses{none, none + 0};
      auto y = layer.forward(in[0], rope, mask, losses);
      if (!layer.moe) return {y};
      return {y, losses.aux, losses.z};
    };
    auto outs = recompute_layers_ ? model::recompute(run_layer, {x}) : run_layer({x});
    auto marked = mark_outputs(&group, outs);
    x = marked[0];
    if (layer.moe) {
      out.losses.aux = out.losses.aux + marked[1];
      out.losses.z = out.losses.z + marked[2];
    }
    group.release();
  }
  x = mark_input(&head_, x);
  head_.gather();
  out.logits = mark_outputs(&head_, {model_->head(x)})[0];
  if (tied_) embedding_.begin_backward();  // the head's backward adds to its gradient
  return out;
}

void sharded_model::finish_backward() {
  for (auto& g : layers_) {
    g.end_backward();
    g.release();
  }
  head_.end_backward();
  head_.release();
  embedding_.end_backward();
  embedding_.release();
}

void sharded_model::set_last_micro_batch(bool last) {
  for (auto& u : units_) u.set_last_backward(last);
}

void sharded_model::reduce_step_gradients() {
  for (auto& u : units_) u.reduce_step_gradients();
}

void sharded_model::zero_grad() {
  for (auto& u : units_) u.zero_grad();
}

std::vector<flat_unit*> sharded_model::units() {
  std::vector<flat_unit*> all;
  for (auto& u : units_) all.push_back(&u);
  return all;
}

std::int64_t sharded_model::buffer_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& [group, buffers] : buffers_)
    if (buffers) bytes += buffers->bytes();
  return bytes;
}

held_bytes sharded_model::held() const {
  held_bytes h;
  for (const auto& u : units_) {
    auto b = u.held();
    h.params += b.params;
    h.grads += b.grads;
  }
  return h;
}

}  // namespace muster::engine::parallel

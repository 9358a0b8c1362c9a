// One FSDP sharding unit: see flat_unit.hpp.
#include "engine/parallel/flat_unit.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace muster::engine::parallel {
namespace {

bool no_decay(const std::string& name) {
  return name.ends_with("norm.weight") || name.ends_with(".bias");
}

}  // namespace

flat_unit::flat_unit(unit_options options,
                     std::vector<std::pair<std::string, torch::Tensor>> params)
    : options_(std::move(options)), params_(std::move(params)) {
  // Alone, every strategy holds the same: keep it simple.
  if (!options_.group || options_.group->size() == 1) options_.strategy = sharding::no_shard;
  for (auto& [name, p] : params_) {
    MUSTER_CHECK(p.scalar_type() == torch::kFloat32 && p.is_contiguous(), errc::internal,
                 "sharding unit {}: parameter {} must be contiguous fp32", options_.name, name);
    MUSTER_CHECK(model::materialised(p) || options_.init, errc::internal,
                 "sharding unit {}: parameter {} has no values and nothing initialises it",
                 options_.name, name);
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  ranks_ = options_.strategy == sharding::no_shard ? 1 : options_.group->size();
  shard_ = (numel_ + ranks_ - 1) / ranks_;
  const auto whole = shard_ * ranks_;
  const auto first = shard_rank() * shard_;
  if (options_.group && options_.group->size() > 1)
    buffers_ =
        options_.buffers ? options_.buffers : std::make_shared<collective_buffers>(options_.group);
  // Sharded parameters: only this rank's shard is ever written (the whole buffer is address
  // space until gathered); else the whole buffer.
  full_params_ = params_sharded() ? torch::empty({whole}, f32()) : persistent_buffer();
  if (params_sharded()) shard_params_ = torch::zeros({shard_}, f32());
  auto mask = torch::zeros({shard_}, f32());
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& [name, p] = params_[i];
    // The part of [offset, offset + numel) in [first, first + shard).
    const auto begin = std::max(offsets_[i], first);
    const auto end = std::min(offsets_[i] + p.numel(), first + shard_);
    // Another rank's shard alone: nothing of this parameter is drawn or copied here.
    if (!params_sharded() || begin < end) {
      torch::Tensor value = p;
      if (!model::materialised(p)) {
        value = torch::empty(p.sizes(), torch::kFloat32);  // one parameter at a time
        options_.init(name, value);
      }
      if (params_sharded())
        shard_params_.narrow(0, begin - first, end - begin)
            .copy_(value.reshape({-1}).narrow(0, begin - offsets_[i], end - begin));
      else
        full_params_.narrow(0, offsets_[i], p.numel()).view(p.sizes()).copy_(value);
    }
    p.set_data(full_params_.narrow(0, offsets_[i], p.numel()).view(p.sizes()));
    if (!no_decay(name) && begin < end) mask.narrow(0, begin - first, end - begin).fill_(1);
  }
  decay_mask_ = mask;
  if (params_sharded()) {
    model::free_storage(full_params_);
    gathered_ = false;
  } else {
    shard_params_ = full_params_.narrow(0, first, shard_);
  }
  if (grads_sharded()) {
    shard_grads_ = torch::zeros({shard_}, f32());
  } else {
    full_grads_ = persistent_buffer();
    point_grads_at(full_grads_);
    shard_grads_ = full_grads_.narrow(0, first, shard_);
  }
}

torch::Tensor flat_unit::persistent_buffer() {
  const auto whole = shard_ * ranks_;
  if (!buffers_) return torch::zeros({whole}, f32());
  return options_.group->collective_buffer(whole, f32()).zero_();
}

int flat_unit::shard_rank() const {
  return ranks_ == 1 ? 0 : options_.group->rank();
}

void flat_unit::point_grads_at(const torch::Tensor& buffer) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i].second;
    p.mutable_grad() = buffer.narrow(0, offsets_[i], p.numel()).view(p.sizes());
  }
}

void flat_unit::start_gather() {
  gather_buffer_ = buffers_->take(shard_ * ranks_, f32());
  pending_gather_ = options_.group->all_gather_into_async(shard_params_, gather_buffer_);
  count(gather_buffer_.nbytes());
}

void flat_unit::prefetch() {
  if (gathered_ || pending_gather_) return;
  start_gather();
}

void flat_unit::gather() {
  if (gathered_) return;
  if (!pending_gather_) start_gather();
  const auto pending = std::move(pending_gather_);  // gone even when the wait throws
  pending->wait();
  model::borrow_storage(full_params_, gather_buffer_);
  gathered_ = true;
}

void flat_unit::release() {
  if (!params_sharded() || !(gathered_ || pending_gather_)) return;
  if (pending_gather_) {  // prefetched, never used: the gather still writes the buffer
    const auto pending = std::move(pending_gather_);
    pending->wait();
  }
  count(-gather_buffer_.nbytes());
  if (gathered_) model::free_storage(full_params_);
  buffers_->give_back(std::move(gather_buffer_));
  gathered_ = false;
}

void flat_unit::begin_backward() {
  if (!grads_sharded() || in_backward_) return;
  finish_reduce();  // an earlier micro-batch's
  full_grads_ = buffers_->take(shard_ * ranks_, f32()).zero_();
  point_grads_at(full_grads_);
  in_backward_ = true;
  count(full_grads_.nbytes());
}

void flat_unit::start_reduce(torch::Tensor whole, bool add, bool transient) {
  const auto wire = options_.reduce_dtype;
  auto& r = reduction_;
  r.whole = std::move(whole);
  r.sent = r.whole;
  if (wire != r.whole.scalar_type())
    r.sent = buffers_->take(r.whole.numel(), r.whole.options().dtype(wire)).copy_(r.whole);
  // In place: this rank's part of what is sent (NCCL's in-place form), so no buffer is taken
  // for it. `whole` is scratch once reduced: given back (transient), or (persistent, under
  // optim) zeroed before the next step, its part then being shard_grads_ itself.
  r.part = r.sent.narrow(0, shard_rank() * shard_, shard_);
  r.add = add;
  r.transient = transient;
  r.pending = options_.group->reduce_scatter_sum_into_async(r.sent, r.part);
}

void flat_unit::finish_reduce() {
  auto& r = reduction_;
  if (!r.pending) return;
  {
    const auto pending = std::move(r.pending);  // gone even when the wait throws
    pending->wait();
  }
  if (r.add) {
    shard_grads_.add_(r.part);
  } else if (r.part.data_ptr() != shard_grads_.data_ptr()) {
    shard_grads_.copy_(r.part);
  }
  if (!r.sent.is_same(r.whole)) buffers_->give_back(std::move(r.sent));
  if (r.transient) {
    count(-r.whole.nbytes());
    buffers_->give_back(std::move(r.whole));
  }
  r = reduction{};
}

void flat_unit::start_all_reduce() {
  if (all_reduce_ || !buffers_) return;
  const auto wire = options_.reduce_dtype;
  wire_grads_ = wire == full_grads_.scalar_type()
                    ? full_grads_
                    : buffers_->take(full_grads_.numel(), f32().dtype(wire)).copy_(full_grads_);
  all_reduce_ = options_.group->all_reduce_sum_async(wire_grads_);
}

void flat_unit::start_step_reduce() {
  if (step_reduce_started_) return;
  step_reduce_started_ = true;
  start_reduce(full_grads_, /*add=*/false, /*transient=*/false);
}

void flat_unit::end_backward() {
  if (last_backward_ && buffers_) {
    if (options_.strategy == sharding::no_shard) start_all_reduce();
    // optim: this unit's gradients of the step are whole now; with overlap_reduce their
    // reduce-scatter runs while the backward of the units below goes on
    if (options_.strategy == sharding::optim && options_.overlap_reduce) start_step_reduce();
  }
  if (!in_backward_) return;
  in_backward_ = false;
  auto whole = std::move(full_grads_);
  for (auto& [name, p] : params_) p.mutable_grad().reset();
  full_grads_ = torch::Tensor();
  // grads are sharded: so is the unit, over S > 1 ranks. The whole buffer stays counted (and
  // taken) until the reduction is finished.
  start_reduce(std::move(whole), /*add=*/true, /*transient=*/true);
  if (!options_.overlap_reduce) finish_reduce();
}

void flat_unit::reduce_step_gradients() {
  finish_reduce();
  if (grads_sharded() || !options_.group || options_.group->size() == 1) return;
  if (options_.strategy == sharding::no_shard) {
    start_all_reduce();
    const auto pending = std::move(all_reduce_);  // gone even when the wait throws
    pending->wait();
    if (!wire_grads_.is_same(full_grads_)) {
      full_grads_.copy_(wire_grads_);
      buffers_->give_back(std::move(wire_grads_));
    }
    wire_grads_ = torch::Tensor();
  } else {
    start_step_reduce();  // unless end_backward did
    finish_reduce();
    step_reduce_started_ = false;
  }
}

void flat_unit::zero_grad() {
  finish_reduce();
  step_reduce_started_ = false;
  if (grads_sharded()) shard_grads_.zero_();  // else a part of full_grads_
  if (full_grads_.defined()) full_grads_.zero_();
}

void flat_unit::after_update() {
  if (options_.strategy != sharding::optim && options_.strategy != sharding::optim_grads) return;
  if (ranks_ == 1) return;
  // In place: this rank's shard is its part of full_params_ (NCCL's in-place all-gather; Gloo
  // gathers into a buffer of its own first).
  options_.group->all_gather_into(shard_params_, full_params_);
}

torch::Tensor flat_unit::whole_values() {
  if (params_sharded()) return options_.group->all_gather(shard_params_);
  return full_params_;
}

void flat_unit::load_whole(const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  const auto n = std::min<std::int64_t>(whole.numel(), shard_ * ranks_);
  auto padded = torch::zeros({shard_ * ranks_}, f32());
  padded.narrow(0, 0, n).copy_(whole.narrow(0, 0, n));
  if (params_sharded()) {
    shard_params_.copy_(padded.narrow(0, shard_rank() * shard_, shard_));
  } else {
    full_params_.copy_(padded);
  }
}

bool flat_unit::writes(std::size_t index) const {
  if (!options_.group) return true;
  return static_cast<std::size_t>(options_.group->rank()) == index % options_.group->size();
}

held_bytes flat_unit::held() const {
  held_bytes h;
  h.params = params_sharded() ? shard_params_.nbytes() : full_params_.nbytes();
  h.grads = grads_sharded() ? shard_grads_.nbytes() : full_grads_.nbytes();
  return h;
}

}  // namespace muster::engine::parallel

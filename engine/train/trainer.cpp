// The training loop of one rank: see trainer.hpp.
#include "engine/train/trainer.hpp"

#include <chrono>

#include "common/error.hpp"
#include "engine/model/init.hpp"
#include "engine/train/batch.hpp"
#include "engine/train/lr_schedule.hpp"

namespace muster::engine::train {
namespace {

bool no_decay(const std::string& name) {
  return name.ends_with("norm.weight") || name.ends_with(".bias");
}

std::unique_ptr<torch::optim::AdamW> make_optimizer(torch::nn::Module& m, const train_section& t) {
  std::vector<torch::Tensor> decay, plain;
  for (auto& p : m.named_parameters()) (no_decay(p.key()) ? plain : decay).push_back(p.value());
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.adam_beta1, t.adam_beta2}).eps(t.adam_eps)
            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(t.weight_decay));
  groups.emplace_back(plain, options(0.0));
  return std::make_unique<torch::optim::AdamW>(std::move(groups));
}

// The sums over the data-parallel group of a few numbers, in one collective (the numbers
// themselves without a group).
std::vector<double> sum_over(comm::communicator* dp, std::vector<double> local) {
  if (!dp) return local;
  auto t = torch::tensor(local, torch::kFloat64);
  dp->all_reduce_sum(t);
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// Every gradient summed over the group, in one flat buffer (a parameter without a gradient,
// an expert no local token reached, counts as zeros).
void sum_gradients(comm::communicator& dp, torch::nn::Module& m) {
  std::vector<torch::Tensor> grads;
  for (auto& p : m.parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad().view({-1}));
  }
  auto flat = torch::cat(grads);
  dp.all_reduce_sum(flat);
  std::int64_t at = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, at, g.numel()));
    at += g.numel();
  }
}

void check_layout(const job_config& c, int dp_size) {
  const auto& p = c.parallel;
  MUSTER_CHECK(p.tensor == 1 && p.pipeline == 1 && p.context == 1 && p.expert == 1,
               errc::invalid_input,
               "muster-train runs data parallel only for now: parallel.tensor, pipeline, context "
               "and expert must be 1 (found {}, {}, {}, {})",
               p.tensor, p.pipeline, p.context, p.expert);
  MUSTER_CHECK(dp_size == 1 || p.sharding == "no_shard", errc::invalid_input,
               "parallel.sharding = {} over {} ranks is not built yet; use parallel.sharding = "
               "no_shard (every rank holds the whole model)",
               p.sharding, dp_size);
}

}  // namespace

trainer::trainer(const job_config& config, std::unique_ptr<data::document_source> documents,
                 std::shared_ptr<comm::communicator> dp)
    : config_(config), documents_(std::move(documents)), dp_(std::move(dp)) {
  check_layout(config, dp_ ? dp_->size() : 1);
  MUSTER_CHECK(documents_->vocab_size() <= config.model.vocab_size, errc::invalid_input,
               "data: {} holds token ids up to {} but model.vocab_size is {}; raise "
               "model.vocab_size (byte-level text needs 256)",
               documents_->describe(), documents_->vocab_size() - 1, config.model.vocab_size);
  const auto& t = config.train;
  const bool pack = t.max_tokens_per_pack > 0;
  plan_ = std::make_unique<data::pack_plan>(
      *documents_, data::pack_options{pack ? t.max_tokens_per_pack : t.seq_length, pack,
                                      static_cast<std::uint64_t>(t.seed)});
  model_ = std::make_shared<model::transformer>(model::make_model_config(config.model));
  model::init_parameters(*model_, static_cast<std::uint64_t>(t.seed));
  optimizer_ = make_optimizer(*model_, t);
  if (dp_)
    model_->set_router_group({[dp = dp_](torch::Tensor& x) { dp->all_reduce_sum(x); }, dp_->size()});
}

step_result trainer::step() {
  const auto start = std::chrono::steady_clock::now();
  const auto& t = config_.train;
  step_result r;
  r.step = next_step_;
  r.lr = lr_at(next_step_, t);
  for (auto& group : optimizer_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(r.lr);

  // Every micro-batch of the step first: the loss is divided by the step's label tokens.
  const int dp_rank = dp_ ? dp_->rank() : 0, dp_size = dp_ ? dp_->size() : 1;
  const data::batch_shape shape{t.micro_batch_size, t.grad_accum_steps, dp_size};
  std::vector<batch> micro;
  std::int64_t label_tokens = 0;
  for (int m = 0; m < t.grad_accum_steps; ++m) {
    std::vector<std::int64_t> rows;
    for (int i = 0; i < t.micro_batch_size; ++i)
      rows.push_back(data::global_row(next_step_, m, dp_rank, i, shape));
    micro.push_back(make_batch(*plan_, rows));
    label_tokens += micro.back().num_label_tokens;
    r.tokens += micro.back().num_tokens;
  }
  label_tokens = static_cast<std::int64_t>(sum_over(dp_.get(), {double(label_tokens)})[0]);
  optimizer_->zero_grad();
  double loss_sum = 0;
  for (auto& b : micro) {
    auto out = model_->forward(b.tokens, b.positions, b.segments);
    auto lm = model::token_loss_sum(out.logits, b.labels);
    auto loss = lm / double(std::max<std::int64_t>(label_tokens, 1)) +
                (out.losses.aux + out.losses.z) / double(t.grad_accum_steps);
    loss.backward();
    loss_sum += lm.item<double>();
    r.aux_loss += out.losses.aux.item<double>() / t.grad_accum_steps;
    r.z_loss += out.losses.z.item<double>() / t.grad_accum_steps;
  }
  if (dp_) sum_gradients(*dp_, *model_);
  // The router losses are each rank's share of the group's: their sums are the group's.
  const auto sums = sum_over(dp_.get(), {loss_sum, r.aux_loss, r.z_loss});
  r.loss = sums[0] / double(std::max<std::int64_t>(label_tokens, 1));
  r.aux_loss = sums[1];
  r.z_loss = sums[2];
  r.grad_norm = torch::nn::utils::clip_grad_norm_(
      model_->parameters(), t.grad_clip > 0 ? t.grad_clip : std::numeric_limits<double>::infinity());
  optimizer_->step();
  ++next_step_;
  r.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.tokens_per_s = double(r.tokens) / std::max(r.step_time_s, 1e-9);
  return r;
}

}  // namespace muster::engine::train

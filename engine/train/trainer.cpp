// The training loop of one rank: see trainer.hpp.
#include "engine/train/trainer.hpp"

#include <ATen/record_function.h>

#include <chrono>
#include <cstdlib>

#include "common/error.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "engine/comm/wait_clock.hpp"
#include "engine/data/job_documents.hpp"
#include "engine/model/autocast_scope.hpp"
#include "engine/model/init.hpp"
#include "engine/parallel/expert_dispatch.hpp"
#include "engine/parallel/process_groups.hpp"
#include "engine/train/batch.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/device_peak.hpp"
#include "engine/train/lr_schedule.hpp"
#include "launcher/plan/model_params.hpp"

namespace muster::engine::train {
namespace {

// The sums over the data-parallel group of a few numbers, in one collective (the numbers
// themselves without a group).
std::vector<double> sum_over(comm::communicator* dp, std::vector<double> local) {
  if (!dp) return local;
  auto t = torch::tensor(local, torch::kFloat64);
  dp->all_reduce_sum(t);
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// The micro-batches a step takes on each rank: train.global_batch_size over micro_batch_size x
// the data-parallel ranks when it is set (as Megatron derives it), else train.grad_accum_steps.
int grad_accum_of(const train_section& t, int dp_size) {
  if (t.global_batch_size <= 0) return t.grad_accum_steps;
  const int rows = t.micro_batch_size * dp_size;
  MUSTER_CHECK(t.global_batch_size % rows == 0, errc::config,
               "train.global_batch_size = {} is not a multiple of train.micro_batch_size x "
               "data-parallel ranks = {} x {} = {}; set global_batch_size to a multiple of {} "
               "(muster plan proposes sizes)",
               t.global_batch_size, t.micro_batch_size, dp_size, rows, rows);
  return t.global_batch_size / rows;
}

// The job with train.grad_accum_steps resolved so.
job_config with_grad_accum(job_config config, int dp_size) {
  config.train.grad_accum_steps = grad_accum_of(config.train, dp_size);
  return config;
}

}  // namespace

trainer::trainer(const job_config& config, std::unique_ptr<data::document_source> documents,
                 std::shared_ptr<comm::communicator> dp)
    : config_(with_grad_accum(config, dp ? dp->size() : 1)),
      documents_(std::move(documents)),
      dp_(std::move(dp)) {
  if (config.train.deterministic) {
    // cuBLAS is deterministic only with a fixed workspace, set before its first use.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  device_ = training_device(config.train);
  const auto groups = parallel::make_process_groups(config, dp_);
  data::check_vocab(*documents_, config.model);
  const auto& t = config_.train;
  const bool pack = t.max_tokens_per_pack > 0;
  plan_ = std::make_unique<data::pack_plan>(
      *documents_, data::pack_options{pack ? t.max_tokens_per_pack : t.seq_length, pack,
                                      static_cast<std::uint64_t>(t.seed)});
  auto shape = model::make_model_config(config.model);
  shape.ep_size = groups.ep_size;
  shape.ep_rank = groups.ep_rank;
  shape.recompute_attention_core = t.recompute == "selective";
  shape.expert_gemm = model::expert_gemm_method(t.expert_gemm);
  // Built without memory; each unit then materialises this rank's shard of it.
  shape.shapes_only = true;
  model_ = std::make_shared<model::transformer>(shape);
  sharded_ = std::make_unique<parallel::sharded_model>(
      model_, parallel::shard_groups{dp_, groups.expert_data, dp_},
      parallel::parse_sharding(config.parallel.sharding),
      t.grad_reduce_dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32,
      [seed = static_cast<std::uint64_t>(t.seed)](const std::string& name, torch::Tensor& whole) {
        model::init_parameter(name, whole, seed);
      },
      device_);
  sharded_->set_recompute_layers(t.recompute == "full");
  sharded_->set_prefetch(config.parallel.fsdp_prefetch);
  sharded_->set_overlap_grad_reduce(config.parallel.overlap_grad_reduce);
  optimizer_ = std::make_unique<parallel::flat_adamw>(sharded_->units(), t);
  if (groups.expert) model_->set_expert_group(parallel::expert_group_over(groups.expert));
  if (dp_)
    model_->set_router_group({[dp = dp_](torch::Tensor& x) -> std::function<void()> {
                                std::shared_ptr<comm::pending_collective> sum =
                                    dp->all_reduce_sum_async(x);
                                return [sum] { sum->wait(); };
                              },
                              dp_->size()});
  flops_per_token_ = double(launcher::plan::train_flops_per_token(
      launcher::plan::make_model_params(config.model), config.model,
      pack ? t.max_tokens_per_pack : t.seq_length));
  const bool bf16_peak = t.precision == "bf16" && device_.is_cuda();
  peak_tflops_ = t.peak_tflops > 0 ? t.peak_tflops
                                   : measured_matmul_tflops(
                                         bf16_peak ? torch::kBFloat16 : torch::kFloat32, device_);
  peak_source_ = t.peak_tflops > 0 ? "train.peak_tflops"
                                   : std::string("measured ") + (bf16_peak ? "bf16" : "fp32") +
                                         " matmul on " + device_.str();
  // Ranks sharing a machine's cores measure each other's load too: every rank takes the
  // fastest's, so the ranks' MFU are of one peak (and the slow measurements' do not pass 100%).
  if (!(t.peak_tflops > 0) && dp_ && dp_->size() > 1) {
    const auto mine = torch::full({1}, peak_tflops_,
                                  torch::TensorOptions().dtype(torch::kFloat64).device(device_));
    peak_tflops_ = dp_->all_gather(mine).max().item<double>();
    peak_source_ += fmt::format(", the fastest of {} ranks'", dp_->size());
  }
  phase_ = "data";
}

step_result trainer::step() {
  const auto start = std::chrono::steady_clock::now();
  const double waited = comm::waited_seconds();
  const auto& t = config_.train;
  step_result r;
  r.step = next_step_;
  r.lr = lr_at(next_step_, t);

  // Every micro-batch of the step first: the loss is divided by the step's label tokens.
  const int dp_rank = dp_ ? dp_->rank() : 0, dp_size = dp_ ? dp_->size() : 1;
  const data::batch_shape shape{t.micro_batch_size, t.grad_accum_steps, dp_size};
  phase_ = "data";
  std::vector<batch> micro;
  std::int64_t label_tokens = 0;
  for (int m = 0; m < t.grad_accum_steps; ++m) {
    std::vector<std::int64_t> rows;
    for (int i = 0; i < t.micro_batch_size; ++i)
      rows.push_back(data::global_row(next_step_, m, dp_rank, i, shape) + row_offset_);
    micro.push_back(
        make_batch(*plan_, rows, config_.model.vocab_size, documents_->describe()).to(device_));
    label_tokens += micro.back().num_label_tokens;
    r.tokens += micro.back().num_tokens;
  }
  // The step's label tokens over the group, summed while the first forward runs (the loss
  // needs them only after it), so the ranks do not wait for each other here.
  auto label_count = torch::tensor({double(label_tokens)}, torch::kFloat64);
  auto label_sum = dp_ ? dp_->all_reduce_sum_async(label_count) : nullptr;
  sharded_->zero_grad();
  double loss_sum = 0;
  for (std::size_t m = 0; m < micro.size(); ++m) {
    const auto& b = micro[m];
    sharded_->set_last_micro_batch(m + 1 == micro.size());
    phase_ = "forward";
    model::transformer_output out;
    {
      RECORD_USER_SCOPE("muster::forward");  // named ranges in a profile (train.profile_step_*)
      model::autocast_scope mixed(model::autocast_state::bf16(t.precision == "bf16"));
      out = sharded_->forward(b.tokens, b.positions, b.segments);
    }
    if (label_sum) {  // the first micro-batch: the group's count, once
      label_sum->wait();
      label_sum.reset();
      label_tokens = static_cast<std::int64_t>(label_count.item<double>());
    }
    auto lm = model::token_loss_sum(out.logits, b.labels);
    auto loss = lm / double(std::max<std::int64_t>(label_tokens, 1)) +
                (out.losses.aux + out.losses.z) / double(t.grad_accum_steps);
    phase_ = "backward";
    {
      RECORD_USER_SCOPE("muster::backward");
      loss.backward();
      sharded_->finish_backward();
    }
    loss_sum += lm.item<double>();
    r.aux_loss += out.losses.aux.item<double>() / t.grad_accum_steps;
    r.z_loss += out.losses.z.item<double>() / t.grad_accum_steps;
  }
  phase_ = "optimizer";
  RECORD_USER_SCOPE("muster::optimizer");  // to the end of the step
  sharded_->reduce_step_gradients();
  // The router losses are each rank's share of the group's: their sums are the group's.
  const auto sums =
      sum_over(dp_.get(), {loss_sum, r.aux_loss, r.z_loss, stop_requested_ ? 1.0 : 0.0});
  r.stop = sums[3] > 0;
  r.loss = sums[0] / double(std::max<std::int64_t>(label_tokens, 1));
  r.aux_loss = sums[1];
  r.z_loss = sums[2];
  r.grad_norm = parallel::clip_grad_norm(sharded_->units(), dp_.get(), t.grad_clip);
  optimizer_->step(r.lr);
  ++next_step_;
  r.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.comm_wait_s = comm::waited_seconds() - waited;
  r.tokens_per_s = double(r.tokens) / std::max(r.step_time_s, 1e-9);
  r.mfu = r.tokens_per_s * flops_per_token_ / (peak_tflops_ * 1e12);
  phase_ = "data";
  return r;
}

std::filesystem::path trainer::save(const std::filesystem::path& root, int keep) {
  phase_ = "checkpoint";
  saving_ = true;
  auto dir =
      checkpoint::save_checkpoint(root, next_step_, row_offset_ + next_step_ * rows_per_step(),
                                  *sharded_, *optimizer_, config_, dp_.get(), keep);
  saving_ = false;
  phase_ = "data";
  return dir;
}

void trainer::load(const std::filesystem::path& dir) {
  phase_ = "checkpoint";
  loading_ = true;
  next_step_ = static_cast<int>(
      checkpoint::load_checkpoint(dir, *sharded_, *optimizer_, config_, dp_.get()));
  // its steps read rows_consumed rows: the data goes on after them, whatever this run's batch
  const auto consumed = checkpoint::rows_consumed(dir);
  row_offset_ = consumed ? *consumed - std::int64_t{next_step_} * rows_per_step() : 0;
  loading_ = false;
  phase_ = "data";
}

parallel::held_bytes trainer::held() const {
  auto h = sharded_->held();
  h.optimizer = optimizer_->held_bytes();
  return h;
}

}  // namespace muster::engine::train

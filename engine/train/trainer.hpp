// The training loop of one rank: each step runs train.grad_accum_steps micro-batches of
// train.micro_batch_size rows through the model, sums the language-model loss over tokens and
// divides it by the step's label tokens (so padding and packing never bias it), adds the MoE
// router losses averaged over micro-batches, clips the gradient norm and takes an AdamW step
// at the schedule's learning rate.
// Over several ranks it is data parallel without sharding (no_shard): each rank reads its own
// rows, the label-token count, the router's expert counts and the gradients are summed over the
// ranks, and every rank takes the same step; the result equals one rank reading all rows. The
// model's state is held and reduced as parallel.sharding says (engine/parallel/sharded_model.hpp):
// every strategy gives the same steps. With parallel.expert > 1 each rank holds its share of every
// MoE layer's experts and tokens travel to them by all-to-all (engine/parallel/).
// train.precision = bf16 runs the forward under bf16 autocast with fp32 main weights
// (model/autocast_scope.hpp); train.recompute = selective or full recomputes the attention core
// or whole layers in backward (model/recompute.hpp); train.deterministic turns on PyTorch's
// deterministic algorithms (and cuBLAS's fixed workspace).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "common/job_config.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/data/document_source.hpp"
#include "engine/data/pack_plan.hpp"
#include "engine/model/decoder.hpp"
#include "engine/parallel/flat_adamw.hpp"
#include "engine/parallel/sharded_model.hpp"

namespace muster::engine::train {

struct step_result {
  int step = 0;          // 0-based
  double loss = 0;       // language-model loss per label token
  double aux_loss = 0;   // load-balancing loss, times its coefficient
  double z_loss = 0;     // router z-loss, times its coefficient
  double grad_norm = 0;  // before clipping
  double lr = 0;
  std::int64_t tokens = 0;  // tokens this rank processed in the step (padding included)
  double step_time_s = 0;
  double comm_wait_s = 0;  // of step_time_s, blocked in collectives (engine/comm/wait_clock)
  double tokens_per_s = 0;
  double mfu = 0;     // model FLOPs (planner's count, no recompute) / step time / peak
  bool stop = false;  // some rank was asked to stop (request_stop) before this step's end
};

class trainer {
 public:
  // Builds and initialises the model (train.seed) and the data order; `dp` is the data-parallel
  // group (nullptr: this rank alone). Throws errc::invalid_input naming the key when the data
  // does not fit the model (a token id past model.vocab_size), or when the layout needs what
  // is not built yet (TP, PP, CP); errc::config for a layout the planner refuses.
  trainer(const job_config& config, std::unique_ptr<data::document_source> documents,
          std::shared_ptr<comm::communicator> dp = nullptr);

  // Runs step next_step() and moves on.
  step_result step();
  // Marks this rank as asked to stop (a signal): the next step's result says so on every rank,
  // so all of them can save the same checkpoint and end together.
  void request_stop() { stop_requested_ = true; }
  // A checkpoint after next_step() steps under `root` (collective); returns its directory.
  std::filesystem::path save(const std::filesystem::path& root, int keep);
  // Continues from checkpoint `dir` (engine/checkpoint/checkpoint_io.hpp): next_step() becomes
  // the steps it was saved after (0 for a Hugging Face model's weights).
  void load(const std::filesystem::path& dir);
  int next_step() const { return next_step_; }
  // What this rank is doing, for its error record: startup, data, forward, backward,
  // optimizer or checkpoint (the phase an exception escaped from).
  const char* phase() const { return phase_; }
  // The 0-based step an error of phase() belongs to: the step being trained; a checkpoint's
  // save, the last step done (the checkpoint of step N is step-N's); none while loading one.
  std::optional<int> error_step() const {
    if (loading_) return std::nullopt;
    if (saving_) return next_step_ - 1;
    return next_step_;
  }
  // Training FLOPs per token (launcher/plan/model_params.hpp) and the peak MFU is taken of.
  double flops_per_token() const { return flops_per_token_; }
  double peak_tflops() const { return peak_tflops_; }
  // Where it computes (train.device, resolved).
  torch::Device device() const { return device_; }
  // Where peak_tflops came from: "train.peak_tflops" or "measured bf16 matmul on cuda:0".
  const std::string& peak_source() const { return peak_source_; }
  model::transformer& model() { return *model_; }
  // Micro-batches a step on each rank: train.grad_accum_steps, or derived from
  // train.global_batch_size over the data-parallel ranks.
  int grad_accum_steps() const { return config_.train.grad_accum_steps; }
  int dp_size() const { return dp_ ? dp_->size() : 1; }
  // The data rows a step reads over all ranks: the global batch.
  std::int64_t rows_per_step() const {
    return std::int64_t{config_.train.micro_batch_size} * config_.train.grad_accum_steps *
           dp_size();
  }
  // Rows a resumed run is ahead of (or behind) step x rows_per_step(): the checkpoint's steps
  // read another global batch; 0 otherwise.
  std::int64_t row_offset() const { return row_offset_; }
  // The training data, and the rows of the model's width it fills an epoch (pack_plan.hpp).
  const data::document_source& documents() const { return *documents_; }
  std::int64_t rows_per_epoch() const { return plan_->rows_per_epoch(); }
  // This rank's persistent parameter, gradient and optimizer bytes.
  parallel::held_bytes held() const;
  // Gathered parameters and whole gradients alive at once, at the most so far.
  std::int64_t peak_transient_bytes() const { return sharded_->transient().peak; }
  std::int64_t collective_buffer_bytes() const { return sharded_->buffer_bytes(); }

 private:
  const job_config config_;
  std::unique_ptr<data::document_source> documents_;
  std::unique_ptr<data::pack_plan> plan_;
  std::shared_ptr<model::transformer> model_;
  std::unique_ptr<parallel::sharded_model> sharded_;
  std::unique_ptr<parallel::flat_adamw> optimizer_;
  std::shared_ptr<comm::communicator> dp_;
  int next_step_ = 0;
  bool stop_requested_ = false;
  const char* phase_ = "startup";
  bool loading_ = false, saving_ = false;  // in load() or save()
  std::int64_t row_offset_ = 0;            // row_offset()
  torch::Device device_ = torch::kCPU;  // train.device, resolved (device_choice.hpp)
  double flops_per_token_ = 0;
  double peak_tflops_ = 0;
  std::string peak_source_;
};

}  // namespace muster::engine::train

// Saving and loading the engine's state. A checkpoint is one directory, step-00000100, holding:
//   model-0000N-of-0000M.safetensors   the weights in Hugging Face's layout and names, fp32;
//                                      rank r writes file r+1 of M = world size, the units it
//                                      is the writer of (one rank of each unit's group), each
//                                      gathered one at a time: no rank holds the whole model
//   model.safetensors.index.json       {"metadata": {"total_size"}, "weight_map": name -> file}
//   config.json                        the model as transformers reads it (hf_config.hpp)
//   optimizer/rank-0000r.safetensors   rank r's Adam moments, per unit "<unit>.exp_avg[_sq]"
//   trainer_state.json                 steps done, layout (world, sharding, EP), seed: the data
//                                      order is a function of the step, so this is the loader's
//                                      state too
// Saves are collective and atomic: every rank writes into step-N.partial, and rank 0 renames it
// into place after all are done, so a crash mid-save leaves the previous checkpoints intact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/job_config.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/parallel/flat_adamw.hpp"
#include "engine/parallel/sharded_model.hpp"

namespace muster::engine::checkpoint {

// Saves after `steps_done` steps under `root`, keeps the newest `keep` (0: all); returns the
// checkpoint's directory. Collective over `world` (null: one rank). Throws errc::io naming the
// file that could not be written.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, std::int64_t steps_done,
                                      std::int64_t rows_consumed, parallel::sharded_model& model,
                                      parallel::flat_adamw& optimizer, const job_config& config,
                                      comm::communicator* world, int keep);

// Loads the weights of `dir` (ours or any Hugging Face model directory: index.json + shards, or
// one model.safetensors; Qwen or Mixtral names; F32, BF16 or F16) into the model, each rank
// reading only its units' tensors. When `dir` is ours, also the optimizer state, which needs the
// same world size, sharding and EP, unless checkpoint.load_optim is false (then the optimizer
// starts afresh); returns the steps it was saved after (0 for weights only).
// Throws errc::invalid_input naming the directory and the tensor or setting that does not match.
// The data rows checkpoint `dir`'s steps read (trainer_state.json's rows_consumed), where it
// says: a run whose global batch differs goes on after them, reading no row twice.
std::optional<std::int64_t> rows_consumed(const std::filesystem::path& dir);

std::int64_t load_checkpoint(const std::filesystem::path& dir, parallel::sharded_model& model,
                             parallel::flat_adamw& optimizer, const job_config& config,
                             comm::communicator* world);

// Where the learning-rate schedule of `now` (train.steps, warmup_steps, lr, min_lr) differs
// from the one checkpoint `dir` was trained on: a warning naming both and the learning rate of
// the step it resumes at under each; none where they agree, or where `dir` does not say (weights
// only, or saved before the schedule was kept). Megatron refuses such a resume unless told
// (--override-opt_param-scheduler); muster goes on, and says so.
std::optional<std::string> schedule_change(const std::filesystem::path& dir,
                                           const train_section& now);

}  // namespace muster::engine::checkpoint

// Where checkpoints are: the step-N directories under a checkpoint root (checkpoint.dir, or the
// run directory's checkpoints/), asked by muster-train to resume and by muster diagnose to say
// where a stopped or failed run can go on from. Plain C++: no LibTorch.
// Not here: what a checkpoint holds and how it is read (checkpoint_io.hpp).
#pragma once

#include <filesystem>
#include <optional>

#include "common/job_config.hpp"

namespace muster::engine::checkpoint {

// The newest complete checkpoint under `root` (step-N with its trainer_state.json, not
// .partial), if any.
std::optional<std::filesystem::path> newest_checkpoint(const std::filesystem::path& root);

// The checkpoint `load` (checkpoint.load) names: `load` itself when it holds a model's weights
// (model.safetensors, or its .index.json: a step-N directory or a Hugging Face model directory),
// else the newest complete step-N under it when there is one (a checkpoint root, as Megatron's
// --load names its --save folder); nullopt when it is neither.
std::optional<std::filesystem::path> checkpoint_to_load(const std::filesystem::path& load);

// Whether `a` and `b` name the same directory as written: made absolute, normalised, a
// trailing '/' dropped ("ckpt/" is "./ckpt"). No file system access beyond the current directory.
bool same_dir(const std::filesystem::path& a, const std::filesystem::path& b);

// The job's checkpoint root: checkpoint.dir, else `run_dir`/checkpoints.
std::filesystem::path checkpoint_root(const job_config& config,
                                      const std::filesystem::path& run_dir);

}  // namespace muster::engine::checkpoint

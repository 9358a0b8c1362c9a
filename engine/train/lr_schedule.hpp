// The learning rate of each step: linear warmup from 0 to train.lr over train.warmup_steps,
// then a cosine decay to train.min_lr at the last step (Megatron's and nanoGPT's schedule).
#pragma once

#include "common/job_config.hpp"

namespace muster::engine::train {

// The learning rate of step `step` (0-based) of a run of t.steps steps.
double lr_at(int step, const train_section& t);

}  // namespace muster::engine::train

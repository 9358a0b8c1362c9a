// Where a rank computes (train.device): auto takes a CUDA device when this muster-train's
// LibTorch has CUDA and one is visible, else the CPU; cuda insists. A rank takes visible device
// LOCAL_RANK modulo their number (one each when the launcher gives every rank its own GPU
// through CUDA_VISIBLE_DEVICES, device 0) and makes it current.
#pragma once

#include <torch/torch.h>

#include "common/job_config.hpp"

namespace muster::engine::train {

// Throws errc::config naming train.device and the fix when cuda is asked for and there is no
// CUDA device (Debian's LibTorch has no CUDA at all).
torch::Device training_device(const train_section& train);

}  // namespace muster::engine::train

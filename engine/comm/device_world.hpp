// The world group on the backend for the rank's device: Gloo on the CPU; on a CUDA device NCCL,
// made beside a Gloo world that carries its rendezvous (store and seq_board). Subgroups
// (make_group) follow the world's backend.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"

namespace muster::engine::comm {

// `nccl_ub`: comm.nccl_ub (NCCL user buffers; refused under expandable segments).
std::shared_ptr<communicator> make_device_world(torch::Device device, const world_options& options,
                                                bool nccl_ub);

}  // namespace muster::engine::comm

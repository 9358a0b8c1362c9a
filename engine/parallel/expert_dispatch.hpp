// The collective behind expert parallelism: an all-to-all of token rows that autograd can go
// back through (its backward sends the rows' gradients back the way they came), and the
// expert_group the MoE blocks dispatch with (engine/model/moe_block.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"
#include "engine/model/moe_block.hpp"

namespace muster::engine::parallel {

// communicator::all_to_all, differentiable in `rows`. `group` must outlive the backward.
torch::Tensor all_to_all_rows(comm::communicator* group, const torch::Tensor& rows,
                              const std::vector<std::int64_t>& send,
                              const std::vector<std::int64_t>& recv);

// The expert group over `group` (the expert-parallel ranks, in EP rank order).
model::expert_group expert_group_over(std::shared_ptr<comm::communicator> group);

}  // namespace muster::engine::parallel

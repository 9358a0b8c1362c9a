// The communicators one rank of the engine trains with, made from the planner's layout and rank
// groups (launcher/plan/), so the engine's groups are Megatron's for the same job file.
// Data parallel and expert parallel only for now (tensor, pipeline and context sizes 1): the
// data-parallel group is every rank; the expert-parallel group (EP ranks that exchange tokens)
// and the expert-data-parallel group (ranks holding the same experts, where expert gradients
// are summed and sharded) come from the expert mesh.
#pragma once

#include <memory>

#include "common/job_config.hpp"
#include "engine/comm/communicator.hpp"

namespace muster::engine::parallel {

struct process_groups {
  std::shared_ptr<comm::communicator> data;         // null: one rank
  std::shared_ptr<comm::communicator> expert;       // null: EP = 1
  std::shared_ptr<comm::communicator> expert_data;  // null: alone
  int ep_size = 1, ep_rank = 0;
};

// `world` from comm::make_world(), or null for one rank. Throws errc::config with the planner's
// message when the layout does not fit the world size or the model (num_experts not divisible
// by parallel.expert, ...), errc::invalid_input when it needs tensor, pipeline or context
// parallelism, which the engine does not run yet.
process_groups make_process_groups(const job_config& config,
                                   std::shared_ptr<comm::communicator> world);

}  // namespace muster::engine::parallel

// The engine's communicators from the planner's groups: see process_groups.hpp.
#include "engine/parallel/process_groups.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/train_limits.hpp"
#include "launcher/plan/job_plan.hpp"

namespace muster::engine::parallel {

process_groups make_process_groups(const job_config& config,
                                   std::shared_ptr<comm::communicator> world) {
  const auto& p = config.parallel;
  check_train_limits(config);  // the launchers asked too, unless muster-train was run another way
  process_groups g;
  g.data = world;
  g.expert_data = world;
  if (p.expert <= 1) return g;
  namespace plan = launcher::plan;
  const int size = world ? world->size() : 1, rank = world ? world->rank() : 0;
  plan::plan_request request;
  request.world = plan::world_size{size, "WORLD_SIZE"};
  std::vector<std::string> warnings;
  const auto layout = plan::checked_layout(config, {}, request, warnings);
  const plan::rank_groups groups(layout, size);
  auto make = [&](plan::group_kind kind) -> std::shared_ptr<comm::communicator> {
    const auto span = groups.group_of(kind, rank);
    if (span.size() == 1) return nullptr;
    return comm::make_group(
        *world, fmt::format("{}{}", plan::group_name(kind), groups.group_index(kind, rank)),
        std::vector<int>(span.begin(), span.end()));
  };
  g.expert = make(plan::group_kind::ep);
  g.expert_data = make(plan::group_kind::edp);
  g.ep_size = layout.ep();
  g.ep_rank = groups.rank_in_group(plan::group_kind::ep, rank);
  return g;
}

}  // namespace muster::engine::parallel

// `muster plan --json`: see plan_output.hpp.
#include <fmt/format.h>

#include "launcher/cli/plan_output.hpp"
#include "launcher/plan/allocation.hpp"

namespace muster::cli {
namespace {

using nlohmann::json;
namespace plan = launcher::plan;

json layout_json(const plan::job_plan& p) {
  const auto& l = p.layout;
  return {{"world", l.world},
          {"world_source", p.request.world ? p.request.world->source : "the parallel sizes"},
          {"gpus_per_node", p.groups.gpus_per_node()},
          {"gpus_per_node_source", p.request.gpus_per_node_source},
          {"num_nodes", p.groups.num_nodes()},
          {"tp", l.tp()}, {"cp", l.cp()}, {"dp", l.dp()}, {"pp", l.pp()}, {"vpp", l.vpp},
          {"ep", l.ep()}, {"etp", l.etp()}, {"edp", l.edp()},
          {"sequence_parallel", l.sequence_parallel}, {"order", l.order},
          {"sharding", p.config.parallel.sharding},
          {"allocation", plan::format_allocation("megatron", l.dp(), l.tp(), l.pp(), l.cp(),
                                                 l.edp(), l.etp(), l.ep())}};
}

json ranks_json(const plan::job_plan& p) {
  json ranks = json::array();
  for (int r = 0; r < p.layout.world; ++r) {
    auto c = p.groups.coords(r);
    json groups = json::object();
    for (auto kind : plan::kGroupKinds)
      groups[std::string(plan::group_name(kind))] = p.groups.group_index(kind, r);
    ranks.push_back({{"rank", r}, {"node", c.node}, {"local_rank", c.local_rank},
                     {"tp", c.tp}, {"cp", c.cp}, {"dp", c.dp}, {"pp", c.pp},
                     {"ep", c.ep}, {"etp", c.etp}, {"edp", c.edp}, {"group_index", groups}});
  }
  return ranks;
}

json rows_json(const std::vector<std::pair<std::string, std::int64_t>>& rows) {
  json out = json::object();
  for (const auto& [name, bytes] : rows) out[name] = bytes;
  return out;
}

json memory_json(const plan::job_plan& p) {
  json stages = json::array();
  for (const auto& stage : p.memory.stages) {
    json s = rows_json(plan::memory_rows(stage));
    s["stage"] = stage.stage;
    s["microbatches_in_flight"] = stage.microbatches_in_flight;
    stages.push_back(s);
  }
  return {{"worst_stage", p.memory.stage()},
          {"worst", rows_json(plan::memory_rows(p.memory))},
          {"gpu_memory_bytes", p.memory.gpu_memory_bytes},
          {"gpu_memory_source", p.request.gpu_memory_source},
          {"reserved_bytes", p.request.memory.reserved_bytes},
          {"weights", p.request.memory.weights == plan::weight_layout::muster_train ? "muster-train"
                                                                                    : "megatron"},
          {"margin_bytes", p.memory.margin_bytes()},
          {"fits", p.memory.fits()},
          {"precision", p.config.train.precision},
          {"grad_reduce_dtype", p.config.train.grad_reduce_dtype},
          {"recompute", p.config.train.recompute},
          {"stages", stages}};
}

json variants_json(const std::vector<plan::variant_estimate>& rows) {
  json out = json::array();
  for (const auto& row : rows) {
    json r = rows_json(plan::memory_rows(row.worst));
    r["setting"] = row.setting;
    r["stage"] = row.worst.stage;
    r["fits"] = row.fits;
    out.push_back(r);
  }
  return out;
}

}  // namespace

nlohmann::json plan_json(const plan::job_plan& p) {
  json groups = json::object();
  for (auto kind : plan::kGroupKinds)
    groups[std::string(plan::group_name(kind))] = p.groups.groups(kind);
  const auto& b = p.batch;
  json fixes = json::array();
  for (const auto& f : p.fixes)
    fixes.push_back({{"what", f.what},
                     {"overrides", f.overrides},
                     {"total_bytes", f.total_bytes},
                     {"fits", f.fits},
                     {"roomy", f.roomy}});
  return {{"valid", true},
          {"fits", p.fits()},
          {"layout", layout_json(p)},
          {"groups", groups},
          {"ranks", ranks_json(p)},
          {"batch",
           {{"micro_batch_size", b.micro_batch_size}, {"grad_accum_steps", b.grad_accum_steps},
            {"global_batch_size", b.global_batch_size}, {"row_tokens", b.row_tokens},
            {"packed", b.packed}, {"tokens_per_step", b.tokens_per_step},
            {"tokens_per_microbatch", b.tokens_per_microbatch},
            {"llamafactory_global_batch_size", b.llamafactory_global_batch_size}}},
          {"model",
           {{"params_total", p.params.total}, {"params_active", p.params.active},
            {"flops_per_token", p.flops_per_token},
            {"moe_layers", std::count(p.params.moe_layers.begin(), p.params.moe_layers.end(), true)},
            {"num_layers", p.config.model.num_layers}}},
          {"memory", memory_json(p)},
          {"compare",
           {{"sharding", variants_json(p.by_sharding)},
            {"recompute", variants_json(p.by_recompute)},
            {"precision", variants_json(p.by_precision)}}},
          {"warnings", p.warnings},
          {"notes", p.notes},
          {"fixes", fixes}};
}

}  // namespace muster::cli

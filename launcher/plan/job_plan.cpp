// Making the whole plan of a job: see job_plan.hpp.
#include "launcher/plan/job_plan.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "launcher/plan/fit_advice.hpp"
#include "launcher/plan/plan_checks.hpp"
#include "launcher/plan/suggest.hpp"

namespace muster::launcher::plan {
namespace {

void placement_warnings(const layout& l, const rank_groups& groups,
                        std::vector<std::string>& warnings, std::vector<std::string>& notes) {
  auto across = groups.tp_groups_across_nodes();
  if (!across.empty())
    warnings.push_back(fmt::format(
        "{} of {} tensor-parallel groups span nodes (tensor = {}, {} GPUs per node): TP traffic "
        "leaves NVLink every layer; use a tensor size that divides {} ({}), or more GPUs per "
        "node",
        across.size(), groups.groups(group_kind::tp).size(), l.tp(), groups.gpus_per_node(),
        groups.gpus_per_node(),
        or_list(nearest_divisors(groups.gpus_per_node(), l.tp(), 8))));
  auto ep_across = groups.groups_across_nodes(group_kind::etp_ep);
  if (l.ep() > 1 && !ep_across.empty())
    notes.push_back(fmt::format(
        "the MoE token all-to-all (expert tensor x expert = {} ranks) crosses nodes in {} of {} "
        "groups; expect it to be bound by the inter-node network",
        l.etp() * l.ep(), ep_across.size(), groups.groups(group_kind::etp_ep).size()));
}

void batch_notes(const layout& l, const batch_plan& b, std::vector<std::string>& notes) {
  if (b.llamafactory_global_batch_size != b.global_batch_size)
    notes.push_back(fmt::format(
        "LLaMA-Factory's MCA note computes the global batch as (world // pp // tp // ep // cp) * "
        "micro * accum = ({} // {} // {} // {} // {}) * {} * {} = {}; Megatron-Core (and muster) "
        "take EP from the expert-data-parallel ranks, so the attention DP is {} and the global "
        "batch {}",
        l.world, l.pp(), l.tp(), l.ep(), l.cp(), b.micro_batch_size, b.grad_accum_steps,
        b.llamafactory_global_batch_size, l.dp(), b.global_batch_size));
  if (b.llamafactory_global_batch_size == 0)
    notes.back() += " (LLaMA-Factory would refuse this layout: its data-parallel size is 0)";
}

void memory_warnings(const memory_estimate& m, std::vector<std::string>& warnings) {
  const double share = spare_share(m.total_bytes(), m.gpu_memory_bytes);
  if (tight_fit(m))
    warnings.push_back(fmt::format(
        "it fits with only {:.1f}% of the GPU to spare; allocator fragmentation can take more "
        "than that: prefer a change from the list below, or raise --reserve to test",
        100.0 * share));
}

// The estimate of `config` with the settings `apply` changes, the layout and batch kept.
template <class Change>
variant_estimate variant(const job_plan& plan, std::string setting, Change&& apply) {
  job_config changed = plan.config;
  apply(changed);
  auto m = estimate_memory(changed, plan.params, plan.layout, plan.batch, plan.request.memory);
  return {std::move(setting), m.worst, m.fits()};
}

void compare_settings(job_plan& plan) {
  for (const char* sharding : {"no_shard", "optim", "optim_grads", "optim_grads_params"})
    plan.by_sharding.push_back(variant(plan, fmt::format("parallel.sharding={}", sharding),
                                       [&](job_config& c) { c.parallel.sharding = sharding; }));
  for (const char* recompute : {"none", "selective", "full"})
    plan.by_recompute.push_back(variant(plan, fmt::format("train.recompute={}", recompute),
                                        [&](job_config& c) { c.train.recompute = recompute; }));
  for (auto [precision, grads] : {std::pair{"bf16", "fp32"}, {"bf16", "bf16"}, {"fp32", "fp32"}})
    plan.by_precision.push_back(
        variant(plan, fmt::format("train.precision={} train.grad_reduce_dtype={}", precision, grads),
                [&](job_config& c) {
                  c.train.precision = precision;
                  c.train.grad_reduce_dtype = grads;
                }));
}

}  // namespace

layout checked_layout(const job_config& config, const config::sources& where,
                      const plan_request& request, std::vector<std::string>& warnings) {
  // the sizes against the world, then the model's split, all listed together
  std::vector<std::string> mesh_errors;
  layout l = resolve_layout(config.parallel, request.world, where, mesh_errors, &config.model);
  check_report report = check_plan(config, l, where, /*sizes_fit=*/mesh_errors.empty());
  report.errors.insert(report.errors.begin(), mesh_errors.begin(), mesh_errors.end());
  if (mesh_errors.empty())
    for (auto mismatch : {pipeline_groups_mismatch(l), pp_last_order_mismatch(l)})
      if (mismatch) report.errors.push_back(*mismatch);
  throw_if_errors(report);
  warnings = std::move(report.warnings);
  return l;
}

job_plan make_plan(const job_config& config, const config::sources& where,
                   const plan_request& request) {
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
  layout l = checked_layout(config, where, request, warnings);
  rank_groups groups(l, request.gpus_per_node);
  placement_warnings(l, groups, warnings, notes);
  batch_plan batch = make_batch_plan(config.train, l);
  batch_notes(l, batch, notes);
  model_params params = make_model_params(config.model);
  std::int64_t flops = train_flops_per_token(params, config.model, batch.row_tokens);
  memory_estimate memory = estimate_memory(config, params, l, batch, request.memory);
  memory_warnings(memory, warnings);
  job_plan plan{config,  l,       std::move(groups), batch, std::move(params), flops,
                memory,  request, std::move(warnings), std::move(notes), {}, {}, {}, {}};
  compare_settings(plan);
  if (!plan.fits() || tight_fit(plan.memory)) plan.fixes = rank_fixes(plan, where);
  return plan;
}

double spare_share(std::int64_t total_bytes, std::int64_t gpu_memory_bytes) {
  return static_cast<double>(gpu_memory_bytes - total_bytes) /
         static_cast<double>(gpu_memory_bytes);
}

bool tight_fit(const memory_estimate& m) {
  return m.fits() && spare_share(m.total_bytes(), m.gpu_memory_bytes) < kTightMargin;
}

}  // namespace muster::launcher::plan

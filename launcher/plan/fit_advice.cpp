// Ranking the changes that would make a plan fit: see fit_advice.hpp.
#include "launcher/plan/fit_advice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "launcher/plan/allocation.hpp"

namespace muster::launcher::plan {
namespace {

using overrides = std::vector<std::string>;

// A config with its resolved layout, batch and estimate.
struct state {
  job_config config;
  config::sources where;
  plan::layout layout;
  batch_plan batch;
  memory_estimate memory;
};

// One kind of change (a line of the guides) and its options, mildest first.
struct change_group {
  std::string what;
  std::function<std::vector<overrides>(const state&)> options;
};

std::optional<state> apply(const state& from, const overrides& changes,
                           const plan_request& request) {
  state to{from.config, from.where, from.layout, from.batch, from.memory};
  try {
    auto fields = config::bind_fields(to.config, job_config_schema());
    for (const auto& change : changes) config::apply_override(change, fields, to.where);
    validate(to.config, to.where);
    std::vector<std::string> warnings;
    to.layout = checked_layout(to.config, to.where, request, warnings);
    to.batch = make_batch_plan(to.config.train, to.layout);
    to.memory = estimate_memory(to.config, to.layout, to.batch, request.memory);
  } catch (const error&) {
    return std::nullopt;
  }
  return to;
}

// Keeps the global batch when the micro batch or the DP size changes: more accumulation.
std::optional<overrides> keep_global_batch(const state& s, int micro, int dp) {
  if (s.config.train.global_batch_size > 0) return overrides{};  // accumulation is derived
  const int global = s.batch.global_batch_size;
  if (global % (micro * dp) != 0) return std::nullopt;
  return overrides{fmt::format("train.grad_accum_steps={}", global / (micro * dp))};
}

// The overrides that give `s` the sizes tp (unchanged), cp, pp, ep on the same world, written
// the way the user wrote the layout (allocation string or keys).
std::optional<overrides> layout_change(const state& s, int cp, int pp, int ep) {
  const layout& l = s.layout;
  const int tp = l.tp();
  const int etp = l.etp();
  if (l.world % (tp * cp * pp) != 0 || l.world % (etp * ep * pp) != 0) return std::nullopt;
  const int dp = l.world / (tp * cp * pp);
  const int edp = l.world / (etp * ep * pp);
  auto batch = keep_global_batch(s, s.config.train.micro_batch_size, dp);
  if (!batch) return std::nullopt;
  overrides out;
  if (!s.config.parallel.allocation.empty()) {
    std::string backend;
    try {
      backend = parse_allocation(s.config.parallel.allocation).backend;
    } catch (const error&) {
      return std::nullopt;
    }
    out.push_back("parallel.allocation=" +
                  format_allocation(backend, dp, tp, pp, cp, edp, etp, ep));
  } else {
    if (cp != l.cp()) out.push_back(fmt::format("parallel.context={}", cp));
    if (pp != l.pp()) out.push_back(fmt::format("parallel.pipeline={}", pp));
    if (ep != l.ep()) out.push_back(fmt::format("parallel.expert={}", ep));
    if (s.config.parallel.data > 0) out.push_back(fmt::format("parallel.data={}", dp));
  }
  out.insert(out.end(), batch->begin(), batch->end());
  return out;
}

// Multiples 2x, 4x, 8x of `size` up to `limit`.
std::vector<int> doublings(int size, int limit) {
  std::vector<int> out;
  for (int v = size * 2; v <= limit && out.size() < 3; v *= 2) out.push_back(v);
  return out;
}

// Each option generator returns its options for state `s`, mildest first.

std::vector<overrides> smaller_micro_batch(const state& s) {
  std::vector<overrides> out;
  const int micro = s.config.train.micro_batch_size;
  for (int mb = micro - 1; mb >= 1; --mb) {
    if (micro % mb != 0) continue;
    auto batch = keep_global_batch(s, mb, s.layout.dp());
    if (!batch) continue;
    overrides o{fmt::format("train.micro_batch_size={}", mb)};
    o.insert(o.end(), batch->begin(), batch->end());
    out.push_back(o);
  }
  return out;
}

std::vector<overrides> shorter_packs(const state& s) {
  std::vector<overrides> out;
  const auto& t = s.config.train;
  for (int div = 2; t.max_tokens_per_pack / div >= 256 && div <= 8; div *= 2) {
    overrides o{fmt::format("train.max_tokens_per_pack={}", t.max_tokens_per_pack / div)};
    if (t.global_batch_size > 0)
      o.push_back(fmt::format("train.global_batch_size={}", t.global_batch_size * div));
    else
      o.push_back(fmt::format("train.grad_accum_steps={}", s.batch.grad_accum_steps * div));
    out.push_back(o);
  }
  return out;
}

std::vector<overrides> more_recompute(const state& s) {
  std::vector<overrides> out;
  if (s.config.train.recompute == "none") out.push_back({"train.recompute=selective"});
  if (s.config.train.recompute != "full") out.push_back({"train.recompute=full"});
  return out;
}

std::vector<overrides> stronger_sharding(const state& s) {
  static const std::vector<std::string> kOrder = {"no_shard", "optim", "optim_grads",
                                                  "optim_grads_params"};
  std::vector<overrides> out;
  auto at = std::find(kOrder.begin(), kOrder.end(), s.config.parallel.sharding);
  for (auto it = at == kOrder.end() ? at : at + 1; it != kOrder.end(); ++it)
    out.push_back({"parallel.sharding=" + *it});
  return out;
}

std::vector<overrides> more_context(const state& s) {
  std::vector<overrides> out;
  for (int cp : doublings(s.layout.cp(), s.layout.world))
    if (auto o = layout_change(s, cp, s.layout.pp(), s.layout.ep())) out.push_back(*o);
  return out;
}

std::vector<overrides> sequence_parallel(const state& s) {
  if (s.layout.tp() > 1 && !s.layout.sequence_parallel)
    return {{"parallel.sequence_parallel=true"}};
  return {};
}

std::vector<overrides> more_experts(const state& s) {
  std::vector<overrides> out;
  for (int ep : doublings(s.layout.ep(), s.config.model.num_experts))
    if (auto o = layout_change(s, s.layout.cp(), s.layout.pp(), ep)) out.push_back(*o);
  return out;
}

std::vector<overrides> more_stages(const state& s) {
  std::vector<overrides> out;
  for (int pp : doublings(s.layout.pp(), s.config.model.num_layers))
    if (auto o = layout_change(s, s.layout.cp(), pp, s.layout.ep())) out.push_back(*o);
  return out;
}

// The guides' order (see fit_advice.hpp).
std::vector<change_group> guide_order() {
  return {{"smaller micro batch (more accumulation keeps the global batch)", smaller_micro_batch},
          {"shorter packs (more accumulation keeps the tokens per step)", shorter_packs},
          {"activation recompute", more_recompute},
          {"stronger sharding", stronger_sharding},
          {"more context parallelism", more_context},
          {"sequence parallelism", sequence_parallel},
          {"more expert parallelism", more_experts},
          {"more pipeline stages", more_stages}};
}

// What a change aims for: to fit, or, for a plan that already fits tightly, to leave room.
using goal = bool (*)(const memory_estimate&);

bool fits(const memory_estimate& m) {
  return m.fits();
}
bool roomy(const memory_estimate& m) {
  return m.fits() && !tight_fit(m);
}

// The group's mildest option that meets `good`, else the one that saves the most; nullopt when
// no option is valid and saves memory.
std::optional<std::pair<overrides, state>> best_option(const change_group& group, const state& s,
                                                       const plan_request& request, goal good) {
  std::optional<std::pair<overrides, state>> best;
  for (const auto& option : group.options(s)) {
    auto next = apply(s, option, request);
    if (!next || next->memory.total_bytes() >= s.memory.total_bytes()) continue;
    if (good(next->memory)) return std::pair{option, std::move(*next)};
    if (!best || next->memory.total_bytes() < best->second.memory.total_bytes())
      best = std::pair{option, std::move(*next)};
  }
  return best;
}

fit_change change_of(std::string what, overrides changes, const memory_estimate& m) {
  return {std::move(what), std::move(changes), m.total_bytes(), m.fits(), roomy(m)};
}

// Later overrides of the same key replace earlier ones; first-seen order is kept.
overrides merge(const overrides& a, const overrides& b) {
  overrides out = a;
  for (const auto& change : b) {
    auto key = change.substr(0, change.find('='));
    auto same = std::find_if(out.begin(), out.end(), [&](const std::string& o) {
      return o.substr(0, o.find('=')) == key;
    });
    if (same != out.end())
      *same = change;
    else
      out.push_back(change);
  }
  return out;
}

}  // namespace

std::vector<fit_change> rank_fixes(const job_plan& plan, const config::sources& where) {
  plan_request request = plan.request;
  request.world = world_size{plan.layout.world, "the planned world"};
  const state start{plan.config, where, plan.layout, plan.batch, plan.memory};
  const auto groups = guide_order();
  const goal good = plan.memory.fits() ? roomy : fits;

  std::vector<fit_change> fixes;
  for (const auto& group : groups)
    if (auto best = best_option(group, start, request, good))
      fixes.push_back(change_of(group.what, best->first, best->second.memory));
  // what the fixes aim for: to fit, or, for a plan that fits tightly, to leave room
  const auto met = [&](const fit_change& f) { return plan.memory.fits() ? f.roomy : f.fits; };
  if (std::any_of(fixes.begin(), fixes.end(), met)) return fixes;

  // No single change fits: combine them in the guides' order until the plan fits.
  state current = start;
  overrides combined;
  std::vector<std::string> names;
  for (const auto& group : groups) {
    auto best = best_option(group, current, request, good);
    if (!best) continue;
    combined = merge(combined, best->first);
    names.push_back(group.what.substr(0, group.what.find(" (")));
    current = std::move(best->second);
    if (good(current.memory)) break;
  }
  if (names.size() > 1)
    fixes.push_back(
        change_of(fmt::format("together: {}", fmt::join(names, " + ")), combined, current.memory));
  return fixes;
}

}  // namespace muster::launcher::plan

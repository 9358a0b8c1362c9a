// Resolving the parallel layout: see layout_resolve.hpp.
#include "launcher/plan/layout_resolve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <tuple>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "launcher/plan/allocation.hpp"
#include "launcher/plan/plan_checks.hpp"
#include "launcher/plan/suggest.hpp"

namespace muster::launcher::plan {
namespace {

// Sizes as given, before the world is known; dp and edp 0 = derive.
struct given_sizes {
  int tp = 1, pp = 1, cp = 1, dp = 0, ep = 1, etp = 1, edp = 0;
  std::string place;   // where the sizes came from, for messages
  bool from_allocation = false;
};

// The key (or allocation letter) a size is set with, for messages.
std::string name_of(const given_sizes& g, std::string_view key, std::string_view letter) {
  return g.from_allocation ? fmt::format("'{}' in parallel.allocation", letter)
                           : fmt::format("parallel.{}", key);
}

given_sizes from_allocation(const parallel_section& p, const config::sources& where) {
  const std::string place = config::place_of(where, "parallel.allocation");
  // A size left at its default (as the example job file writes every key) is not a conflict.
  const parallel_section defaults;
  for (auto [key, value, unset] :
       {std::tuple{"parallel.tensor", p.tensor, defaults.tensor},
        {"parallel.pipeline", p.pipeline, defaults.pipeline},
        {"parallel.context", p.context, defaults.context},
        {"parallel.expert", p.expert, defaults.expert},
        {"parallel.expert_tensor", p.expert_tensor, defaults.expert_tensor},
        {"parallel.data", p.data, defaults.data}})
    MUSTER_CHECK(value == unset, errc::config,
                 "{}: {} = {} and parallel.allocation are both set; give the layout one way: "
                 "set {} back to {} or remove the allocation",
                 config::place_of(where, key), key, value, key, unset);
  allocation a;
  try {
    a = parse_allocation(p.allocation);
  } catch (const error& e) {
    MUSTER_THROW(errc::config, "{}: {}", place, e.what());
  }
  given_sizes g;
  g.place = place;
  g.from_allocation = true;
  g.tp = a.t ? a.t : 1;
  g.pp = a.p ? a.p : 1;
  g.cp = a.c ? a.c : 1;
  g.dp = a.d;
  if (a.folded) {
    MUSTER_CHECK(a.ffn_p == 0 || a.ffn_p == g.pp, errc::config,
                 "{}: parallel.allocation: the attn half has p{} but the ffn half p{}; both "
                 "meshes share the pipeline, so give the same p (or leave it out of the ffn half)",
                 place, g.pp, a.ffn_p);
    g.ep = a.ffn_e ? a.ffn_e : 1;
    g.etp = a.ffn_t ? a.ffn_t : 1;
    g.edp = a.ffn_d;
  } else {
    g.ep = a.e ? a.e : 1;
    g.etp = 1;  // AReaL: without an ffn half, experts are not tensor-parallel
  }
  return g;
}

given_sizes from_keys(const parallel_section& p, const config::sources& where) {
  given_sizes g;
  g.place = config::place_of(where, "parallel.data");
  g.tp = p.tensor;
  g.pp = p.pipeline;
  g.cp = p.context;
  g.dp = p.data;
  g.ep = p.expert;
  g.etp = p.expert_tensor > 0 ? p.expert_tensor : p.tensor;
  return g;
}

int world_from_sizes(const given_sizes& g) {
  MUSTER_CHECK(g.dp > 0, errc::config,
               "the world size is unknown: give --world N (or --nodes N --gpus-per-node G), run "
               "inside a Slurm allocation, or set the data-parallel size ({})",
               g.from_allocation ? "'d' in parallel.allocation" : "parallel.data");
  return g.tp * g.cp * g.dp * g.pp;
}

// The place to blame for a size rule: of `keys` (with their values), one that does not divide
// the world by itself, else one set on the command line, else the first that differs from 1,
// else the first; the allocation string for allocations.
std::string blame(const given_sizes& g, const config::sources& where, int world,
                  std::initializer_list<std::pair<const char*, int>> keys) {
  if (g.from_allocation) return g.place;
  for (auto [key, value] : keys)
    if (world % value != 0 && where.count(key) != 0) return config::place_of(where, key);
  for (auto [key, value] : keys) {
    auto it = where.find(key);
    if (value != 1 && it != where.end() && it->second.starts_with("command line")) return it->second;
  }
  for (auto [key, value] : keys)
    if (value != 1 && where.count(key) != 0) return config::place_of(where, key);
  return config::place_of(where, keys.begin()->first);
}

// Whether the model (when known) splits over each size (resolve_layout's `model`).
struct model_splits {
  const model_section* m = nullptr;
  bool uneven_pipeline = false;  // first/last_stage_layers set: any pipeline size may do
  int vpp = 1;

  bool tensor(int tp) const {
    if (!m) return true;
    const int groups = m->kv_lora_rank > 0 ? m->num_attention_heads : m->num_query_groups;
    return m->num_attention_heads % tp == 0 && groups % tp == 0 && m->ffn_hidden_size % tp == 0 &&
           m->moe_shared_expert_ffn_hidden_size % tp == 0;
  }
  bool pipeline(int pp) const { return !m || uneven_pipeline || m->num_layers % (pp * vpp) == 0; }
  bool expert(int ep) const {
    return !m || (m->num_experts == 0 ? ep == 1 : m->num_experts % ep == 0);
  }
  bool expert_tensor(int etp) const { return !m || m->moe_ffn_hidden_size % etp == 0; }
};

void check_attention_mesh(const given_sizes& g, const world_size& w, const config::sources& where,
                          const model_splits& splits, std::vector<std::string>& errors) {
  const int model_ranks = g.tp * g.cp * g.pp;
  if (w.ranks % model_ranks != 0) {
    auto worlds = nearest_valid(w.ranks, model_ranks, 64 * model_ranks + w.ranks,
                                [&](int n) { return n % model_ranks == 0; }, 2);
    std::string fixes = fmt::format("a world of {} ranks", or_list(worlds));
    auto add = [&](std::string_view key, std::string_view letter, int current,
                   const std::function<bool(int)>& ok) {
      auto values = nearest_valid(current, 1, w.ranks, ok);
      if (!values.empty())
        fixes += fmt::format(", or {} = {}", name_of(g, key, letter), or_list(values));
    };
    add("pipeline", "p", g.pp,
        [&](int pp) { return w.ranks % (g.tp * g.cp * pp) == 0 && splits.pipeline(pp); });
    if (g.tp > 1)
      add("tensor", "t", g.tp,
          [&](int tp) { return w.ranks % (tp * g.cp * g.pp) == 0 && splits.tensor(tp); });
    if (g.cp > 1) add("context", "c", g.cp, [&](int cp) { return w.ranks % (g.tp * cp * g.pp) == 0; });
    errors.push_back(fmt::format(
        "{}: the world of {} ranks ({}) is not divisible by tensor x context x pipeline = {} x {} "
        "x {} = {}; use {}",
        blame(g, where, w.ranks, {{"parallel.pipeline", g.pp}, {"parallel.tensor", g.tp},
                         {"parallel.context", g.cp}}),
        w.ranks, w.source, g.tp, g.cp, g.pp, model_ranks, fixes));
    return;
  }
  if (g.dp > 0 && g.tp * g.cp * g.dp * g.pp != w.ranks) {
    const int derived = w.ranks / model_ranks;
    errors.push_back(fmt::format(
        "{}: {} = {}: tensor x context x data x pipeline = {} x {} x {} x {} = {} ranks, but the "
        "world has {} ({}); use {} = {} or leave it out to derive it",
        g.from_allocation ? g.place : config::place_of(where, "parallel.data"),
        name_of(g, "data", "d"), g.dp, g.tp, g.cp, g.dp, g.pp, g.tp * g.cp * g.dp * g.pp, w.ranks,
        w.source, name_of(g, "data", "d"), derived));
  }
}

void check_expert_mesh(const given_sizes& g, const world_size& w, const config::sources& where,
                       const model_splits& splits, std::vector<std::string>& errors) {
  const int expert_ranks = g.etp * g.ep * g.pp;
  if (w.ranks % expert_ranks != 0) {
    std::vector<int> eps;
    if (w.ranks % (g.etp * g.pp) == 0) {
      const int room = w.ranks / (g.etp * g.pp);
      eps =
          nearest_valid(g.ep, 1, room, [&](int ep) { return room % ep == 0 && splits.expert(ep); });
    }
    std::vector<int> etps = nearest_valid(g.etp, 1, w.ranks, [&](int etp) {
      return w.ranks % (etp * g.ep * g.pp) == 0 && splits.expert_tensor(etp);
    });
    std::string fixes;
    if (!eps.empty()) fixes = fmt::format("; try {} = {}", name_of(g, "expert", "e"), or_list(eps));
    if (g.etp > 1 && !etps.empty())
      fixes += fmt::format("{}{} = {}", fixes.empty() ? "; try " : ", or ",
                           g.from_allocation ? "'t' in the ffn half" : "parallel.expert_tensor",
                           or_list(etps));
    errors.push_back(fmt::format(
        "{}: {} = {} does not fit the expert mesh: expert tensor x expert x pipeline = {} x {} x "
        "{} = {} does not divide the world of {} ranks ({}){}",
        blame(g, where, w.ranks, {{"parallel.expert", g.ep}, {"parallel.expert_tensor", g.etp},
                         {"parallel.pipeline", g.pp}}),
        name_of(g, "expert", "e"), g.ep, g.etp, g.ep, g.pp, expert_ranks, w.ranks, w.source,
        fixes));
    return;
  }
  if (g.edp > 0 && g.edp * expert_ranks != w.ranks)
    errors.push_back(fmt::format(
        "{}: 'd' in the ffn half is {}, but expert tensor x expert x pipeline = {} x {} x {} "
        "leaves {} expert-data-parallel ranks of the {}; use d{} in the ffn half or leave it out "
        "to derive it",
        g.place, g.edp, g.etp, g.ep, g.pp, w.ranks / expert_ranks, w.ranks,
        w.ranks / expert_ranks));
}

}  // namespace

layout resolve_layout(const parallel_section& p, const std::optional<world_size>& world,
                      const config::sources& where) {
  check_report report;
  layout l = resolve_layout(p, world, where, report.errors);
  throw_if_errors(report);
  return l;
}

layout resolve_layout(const parallel_section& p, const std::optional<world_size>& world,
                      const config::sources& where, std::vector<std::string>& errors,
                      const model_section* model) {
  given_sizes g = p.allocation.empty() ? from_keys(p, where) : from_allocation(p, where);
  world_size w = world ? *world
                       : world_size{world_from_sizes(g),
                                    g.from_allocation ? "from parallel.allocation"
                                                      : "from the parallel sizes"};
  MUSTER_CHECK(w.ranks >= 1, errc::config, "the world size {} ({}) must be at least 1", w.ranks,
               w.source);
  const auto had = errors.size();
  const model_splits splits{model, p.first_stage_layers > 0 || p.last_stage_layers > 0,
                            std::max(1, p.virtual_pipeline)};
  check_attention_mesh(g, w, where, splits, errors);
  // An attention mesh that does not fit usually breaks the expert mesh too (shared PP, ETP
  // defaulting to TP): report the expert mesh only on its own.
  if (errors.size() == had) check_expert_mesh(g, w, where, splits, errors);
  if (p.virtual_pipeline > 1 && g.pp == 1)
    errors.push_back(fmt::format(
        "{}: parallel.virtual_pipeline = {} needs pipeline parallelism; set parallel.pipeline "
        "(or 'p') to 2 or more, or virtual_pipeline = 1",
        config::place_of(where, "parallel.virtual_pipeline"), p.virtual_pipeline));

  layout l;
  l.world = w.ranks;
  const int dp = std::max(1, w.ranks / (g.tp * g.cp * g.pp));
  const int edp = std::max(1, w.ranks / (g.etp * g.ep * g.pp));
  l.attn = mesh{.tp = g.tp, .cp = g.cp, .ep = 1, .dp = dp, .pp = g.pp};
  l.expert = mesh{.tp = g.etp, .cp = 1, .ep = g.ep, .dp = edp, .pp = g.pp};
  l.vpp = p.virtual_pipeline;
  l.first_stage_layers = p.first_stage_layers;
  l.last_stage_layers = p.last_stage_layers;
  l.sequence_parallel = p.sequence_parallel;
  l.order = p.order;
  return l;
}

}  // namespace muster::launcher::plan

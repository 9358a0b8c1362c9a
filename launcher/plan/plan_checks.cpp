// The planner's rules against the model and the batch: see plan_checks.hpp.
#include "launcher/plan/plan_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "launcher/plan/suggest.hpp"

namespace muster::launcher::plan {
namespace {

using config::place_of;

class checker {
 public:
  // sizes_fit: the sizes divide the world; else the layout is the sizes as given, the values
  // proposed divide the model only (the world's own message says how to fit it) and the batch,
  // which needs the data-parallel size, waits
  checker(const job_config& c, const layout& l, const config::sources& where, bool sizes_fit)
      : c_(c), l_(l), where_(where), sizes_fit_(sizes_fit) {}

  check_report run() {
    check_pipeline();
    check_experts();
    check_tensor();
    check_sequence();
    if (sizes_fit_) check_batch();
    return std::move(report_);
  }

 private:
  std::string at(std::string_view key) const { return place_of(where_, key); }
  void error(std::string message) { report_.errors.push_back(std::move(message)); }
  void warn(std::string message) { report_.warnings.push_back(std::move(message)); }

  // TP values that divide every one of `sizes` and the ranks left by CP and PP (where the sizes
  // do not fit the world, the world: a value the world's own error cannot take is no help).
  std::vector<int> tensor_sizes_dividing(std::initializer_list<int> sizes) const {
    const int room = sizes_fit_ ? l_.world / (l_.cp() * l_.pp()) : std::max(sizes);
    return nearest_valid(l_.tp(), 1, room, [&](int tp) {
      if (sizes_fit_ ? room % tp != 0 : l_.world % tp != 0) return false;
      for (int s : sizes)
        if (s % tp != 0) return false;
      return true;
    });
  }

  // A split with the first and last stages set and k layers on each of the others, as close to
  // even as possible: "first_stage_layers = 3 and last_stage_layers = 2 (4 on each other stage)".
  std::string uneven_split(int layers, int pp) const {
    if (pp < 2) return "";
    if (pp == 2)
      return fmt::format("parallel.first_stage_layers = {} and parallel.last_stage_layers = {}",
                         layers - layers / 2, layers / 2);
    const int even = (layers + pp - 1) / pp;
    for (int k : {even, even - 1, even + 1}) {
      const int rest = layers - (pp - 2) * k;
      if (k < 1 || rest < 2 || rest > 2 * k) continue;
      return fmt::format("parallel.first_stage_layers = {} and parallel.last_stage_layers = {} ({} "
                         "on each other stage)",
                         rest - rest / 2, rest / 2, k);
    }
    return "";
  }

  void check_pipeline() {
    const auto& m = c_.model;
    if (l_.first_stage_layers > 0 || l_.last_stage_layers > 0) return check_uneven_pipeline();
    const int chunks = l_.pp() * l_.vpp;
    if (m.num_layers % chunks == 0) return;
    const int room = sizes_fit_ ? l_.world / (l_.tp() * l_.cp()) : m.num_layers;
    std::vector<std::string> fixes;
    auto pps = nearest_valid(l_.pp(), 1, room, [&](int pp) {
      return (sizes_fit_ ? room % pp == 0 : l_.world % pp == 0) &&
             m.num_layers % (pp * l_.vpp) == 0;
    });
    if (!pps.empty()) fixes.push_back(fmt::format("parallel.pipeline = {}", or_list(pps)));
    if (l_.vpp > 1 && m.num_layers % l_.pp() == 0)
      fixes.push_back(fmt::format("parallel.virtual_pipeline = {}",
                                  or_list(nearest_divisors(m.num_layers / l_.pp(), l_.vpp))));
    if (l_.vpp == 1) {
      auto split = uneven_split(m.num_layers, l_.pp());
      if (!split.empty()) fixes.push_back(split);
    }
    auto layers = nearest_valid(m.num_layers, chunks, m.num_layers + chunks,
                                [&](int n) { return n % chunks == 0; }, 2);
    fixes.push_back(fmt::format("a model of {} layers", or_list(layers)));
    error(fmt::format(
        "{}: model.num_layers: {} layers do not split into pipeline x virtual_pipeline = {} x {} "
        "= {} equal chunks; use {}",
        at("model.num_layers"), m.num_layers, l_.pp(), l_.vpp, chunks,
        fmt::join(fixes, ", or ")));
  }

  void check_uneven_pipeline() {
    const auto& m = c_.model;
    const int first = l_.first_stage_layers;
    const int last = l_.last_stage_layers;
    const std::string key = first > 0 ? "parallel.first_stage_layers" : "parallel.last_stage_layers";
    if (l_.pp() < 2 || l_.vpp > 1) {
      error(fmt::format("{}: {}: an uneven pipeline needs pipeline >= 2 and virtual_pipeline = 1 "
                        "(pipeline = {}, virtual_pipeline = {}); set it back to 0",
                        at(key), key, l_.pp(), l_.vpp));
      return;
    }
    const int middle_stages = l_.pp() - (first > 0) - (last > 0);
    const int rest = m.num_layers - first - last;
    const bool ok = middle_stages == 0 ? rest == 0
                                       : rest >= middle_stages && rest % middle_stages == 0;
    if (ok) return;
    auto split = uneven_split(m.num_layers, l_.pp());
    error(fmt::format("{}: {}: first {} + last {} layers leave {} of the {} layers for the {} "
                      "other pipeline stages, which is not a whole number (of at least 1) each{}",
                      at(key), key, first, last, rest, m.num_layers, middle_stages,
                      split.empty() ? "" : fmt::format("; use {}", split)));
  }

  void check_experts() {
    const auto& m = c_.model;
    if (m.num_experts == 0) {
      if (l_.ep() > 1)
        error(fmt::format("{}: parallel.expert: {} on a dense model (model.num_experts = 0); "
                          "use expert = 1",
                          at("parallel.expert"), l_.ep()));
      return;
    }
    if (m.num_experts % l_.ep() != 0) {
      const int room = sizes_fit_ ? l_.world / (l_.etp() * l_.pp()) : m.num_experts;
      auto eps = nearest_valid(l_.ep(), 1, room, [&](int ep) {
        return (sizes_fit_ ? room % ep == 0 : l_.world % ep == 0) && m.num_experts % ep == 0;
      });
      error(fmt::format(
          "{}: parallel.expert: {} does not divide the {} experts (model.num_experts); try "
          "expert = {}",
          at("parallel.expert"), l_.ep(), m.num_experts, or_list(eps)));
    }
    if (m.moe_ffn_hidden_size % l_.etp() != 0)
      error(
          fmt::format("{}: model.moe_ffn_hidden_size: {} does not split over expert tensor "
                      "parallel {}; use an expert_tensor that divides it ({})",
                      at("model.moe_ffn_hidden_size"), m.moe_ffn_hidden_size, l_.etp(),
                      or_list(nearest_valid(l_.etp(), 1, m.moe_ffn_hidden_size, [&](int etp) {
                        return m.moe_ffn_hidden_size % etp == 0 && l_.world % etp == 0;
                      }))));
    if (l_.tp() > 1 && !l_.sequence_parallel)
      error(fmt::format("{}: parallel.sequence_parallel: a MoE model with tensor parallelism ({}) "
                        "needs sequence parallelism, as Megatron-LM requires; set "
                        "parallel.sequence_parallel = true (parallel.sequence_parallel=true on "
                        "the command line)",
                        at("parallel.sequence_parallel"), l_.tp()));
  }

  void check_tensor() {
    const auto& m = c_.model;
    const int tp = l_.tp();
    if (tp == 1) return;
    const bool mla = m.kv_lora_rank > 0;
    const int groups = mla ? m.num_attention_heads : m.num_query_groups;
    if (m.num_attention_heads % tp != 0 || groups % tp != 0)
      error(fmt::format(
          "{}: parallel.tensor: {} does not divide the {} attention heads and the {} query "
          "groups (model.num_attention_heads, model.num_query_groups); try tensor = {}",
          at("parallel.tensor"), tp, m.num_attention_heads, groups,
          or_list(tensor_sizes_dividing({m.num_attention_heads, groups}))));
    if (m.ffn_hidden_size % tp != 0)
      error(fmt::format("{}: parallel.tensor: {} does not divide model.ffn_hidden_size {}; try "
                        "tensor = {}",
                        at("parallel.tensor"), tp, m.ffn_hidden_size,
                        or_list(tensor_sizes_dividing({m.ffn_hidden_size}))));
    if (m.moe_shared_expert_ffn_hidden_size % tp != 0)
      error(fmt::format("{}: parallel.tensor: {} does not divide "
                        "model.moe_shared_expert_ffn_hidden_size {}; try tensor = {}",
                        at("parallel.tensor"), tp, m.moe_shared_expert_ffn_hidden_size,
                        or_list(tensor_sizes_dividing({m.moe_shared_expert_ffn_hidden_size}))));
  }

  void check_sequence() {
    const auto& t = c_.train;
    const bool packed = t.max_tokens_per_pack > 0;
    const int tokens = packed ? t.max_tokens_per_pack : t.seq_length;
    const std::string key = packed ? "train.max_tokens_per_pack" : "train.seq_length";
    const int cp = l_.cp();
    if (cp > 1 && tokens % (2 * cp) != 0)
      error(fmt::format("{}: {}: {} tokens do not split into 2 x context = {} load-balanced "
                        "chunks; use {} = {}",
                        at(key), key, tokens, 2 * cp, key,
                        or_list(nearest_valid(tokens, 2 * cp, tokens + 2 * cp,
                                              [&](int n) { return n % (2 * cp) == 0; }, 2))));
    if (l_.sequence_parallel && l_.tp() > 1 && (tokens / cp) % l_.tp() != 0) {
      const int step = cp * l_.tp() * (cp > 1 ? 2 : 1);
      error(fmt::format("{}: {}: {} tokens per context rank do not split over tensor parallel {} "
                        "under sequence parallelism; use {} = {}",
                        at(key), key, tokens / cp, l_.tp(), key,
                        or_list(nearest_valid(tokens, step, tokens + step,
                                              [&](int n) { return n % step == 0; }, 2))));
    }
    if (l_.sequence_parallel && l_.tp() == 1)
      warn("parallel.sequence_parallel = true has no effect with tensor = 1");
  }

  void check_batch() {
    const auto& t = c_.train;
    const int rows = t.micro_batch_size * l_.dp();
    if (t.global_batch_size > 0) {
      if (t.global_batch_size % rows != 0) {
        auto globals = nearest_valid(t.global_batch_size, rows, t.global_batch_size + rows,
                                     [&](int n) { return n % rows == 0; }, 2);
        auto micros = nearest_valid(t.micro_batch_size, 1, t.global_batch_size, [&](int mb) {
          return t.global_batch_size % (mb * l_.dp()) == 0;
        });
        error(fmt::format(
            "{}: train.global_batch_size: {} is not a multiple of micro_batch_size x data "
            "parallel = {} x {} = {}; use global_batch_size = {}{}",
            at("train.global_batch_size"), t.global_batch_size, t.micro_batch_size, l_.dp(), rows,
            or_list(globals),
            micros.empty() ? "" : fmt::format(", or micro_batch_size = {}", or_list(micros))));
        return;
      }
      const int accum = t.global_batch_size / rows;
      // grad_accum_steps left at its default 1 (the example file writes it) is derived.
      if (t.grad_accum_steps != train_section{}.grad_accum_steps && accum != t.grad_accum_steps)
        error(fmt::format("{}: train.grad_accum_steps: {} disagrees with global_batch_size {} / "
                          "(micro_batch_size {} x data parallel {}) = {}; set one of them, not "
                          "both",
                          at("train.grad_accum_steps"), t.grad_accum_steps, t.global_batch_size,
                          t.micro_batch_size, l_.dp(), accum));
    }
    const int accum = t.global_batch_size > 0 ? t.global_batch_size / rows : t.grad_accum_steps;
    if (l_.pp() > 1 && accum % l_.pp() != 0) {
      auto accums = nearest_valid(accum, l_.pp(), accum + l_.pp(),
                                  [&](int n) { return n % l_.pp() == 0; }, 2);
      std::vector<int> globals;
      for (int a : accums) globals.push_back(a * rows);
      warn(fmt::format("{} micro-batches per step is not a multiple of pipeline = {}: the "
                       "pipeline idles in every step; use {} = {}",
                       accum, l_.pp(),
                       t.global_batch_size > 0 ? "train.global_batch_size" : "train.grad_accum_steps",
                       or_list(t.global_batch_size > 0 ? globals : accums)));
    }
  }

  const job_config& c_;
  const layout& l_;
  const config::sources& where_;
  const bool sizes_fit_;
  check_report report_;
};

}  // namespace

check_report check_plan(const job_config& config, const layout& layout,
                        const config::sources& where, bool sizes_fit) {
  return checker(config, layout, where, sizes_fit).run();
}

void throw_if_errors(const check_report& report) {
  if (report.errors.empty()) return;
  if (report.errors.size() == 1) MUSTER_THROW(errc::config, "{}", report.errors.front());
  MUSTER_THROW(errc::config, "the plan has {} problems:\n  {}", report.errors.size(),
               fmt::join(report.errors, "\n  "));
}

}  // namespace muster::launcher::plan

// `muster plan` as a readable report: see plan_output.hpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/byte_size.hpp"
#include "launcher/cli/plan_output.hpp"
#include "launcher/plan/allocation.hpp"

namespace muster::cli {
namespace {

namespace plan = launcher::plan;

constexpr std::size_t kMaxListed = 12;  // longer groups are shown by their ends

std::string members(std::span<const int> ranks) {
  if (ranks.size() <= kMaxListed) return fmt::format("[{}]", fmt::join(ranks, ", "));
  return fmt::format("[{}, ... {}] ({} ranks)", fmt::join(ranks.first(kMaxListed - 2), ", "),
                     fmt::join(ranks.last(1), ", "), ranks.size());
}

// An override as it is pasted into a shell: quoted when it holds anything but plain characters.
std::string shell_word(const std::string& word) {
  bool plain = std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("._=/:,-+@").find(static_cast<char>(c)) !=
                                  std::string_view::npos;
  });
  return plain ? word : "'" + word + "'";
}

// 30.53 B, 12.40 M: parameter counts as model cards give them.
std::string count(std::int64_t n) {
  double v = static_cast<double>(n);
  return v >= 1e9 ? fmt::format("{:.2f} B", v / 1e9) : fmt::format("{:.2f} M", v / 1e6);
}

void print_layout(std::string& out, const plan::job_plan& p) {
  const auto& l = p.layout;
  fmt::format_to(std::back_inserter(out), "layout\n");
  fmt::format_to(std::back_inserter(out),
                 "  world           {} ranks ({}) on {} node{} x {} GPUs ({})\n", l.world,
                 p.request.world ? p.request.world->source : "the product of the parallel sizes",
                 p.groups.num_nodes(), p.groups.num_nodes() == 1 ? "" : "s",
                 p.groups.gpus_per_node(), p.request.gpus_per_node_source);
  const int g = p.groups.gpus_per_node();
  fmt::format_to(std::back_inserter(out),
                 "  placement       node n runs ranks {}n to {}n+{} (Slurm's block distribution)\n",
                 g, g, g - 1);
  fmt::format_to(std::back_inserter(out), "  attention mesh  tp {}  cp {}  dp {}  pp {}  (vpp {}, "
                 "sequence parallel {})\n", l.tp(), l.cp(), l.dp(), l.pp(), l.vpp,
                 l.sequence_parallel ? "on" : "off");
  fmt::format_to(std::back_inserter(out), "  expert mesh     etp {}  ep {}  edp {}  pp {}\n",
                 l.etp(), l.ep(), l.edp(), l.pp());
  fmt::format_to(std::back_inserter(out), "  order {}  sharding {}  as AReaL: {}\n", l.order,
                 p.config.parallel.sharding,
                 plan::format_allocation("megatron", l.dp(), l.tp(), l.pp(), l.cp(), l.edp(),
                                         l.etp(), l.ep()));
}

void print_rank(std::string& out, const plan::job_plan& p, int rank) {
  auto c = p.groups.coords(rank);
  fmt::format_to(std::back_inserter(out),
                 "\nrank {} (node {}, local rank {}): tp {} cp {} dp {} pp {} | etp {} ep {} "
                 "edp {}\n",
                 rank, c.node, c.local_rank, c.tp, c.cp, c.dp, c.pp, c.etp, c.ep, c.edp);
  for (auto kind : plan::kGroupKinds)
    fmt::format_to(std::back_inserter(out), "  {:<13} {}\n", plan::group_name(kind),
                   members(p.groups.group_of(kind, rank)));
}

void print_batch(std::string& out, const plan::job_plan& p) {
  const auto& b = p.batch;
  fmt::format_to(std::back_inserter(out), "\nbatch\n");
  fmt::format_to(std::back_inserter(out),
                 "  global batch    {} = micro {} x accumulation {} x dp {}\n",
                 b.global_batch_size, b.micro_batch_size, b.grad_accum_steps, p.layout.dp());
  fmt::format_to(std::back_inserter(out), "  tokens / step   {} ({} x {}-token {})\n",
                 b.tokens_per_step, b.global_batch_size, b.row_tokens,
                 b.packed ? "packs" : "sequences");
  if (p.layout.pp() > 1)
    fmt::format_to(std::back_inserter(out), "  pipeline        {} micro-batches through {} stages\n",
                   b.grad_accum_steps, p.layout.pp());
}

// How the parameters are kept: "bf16 params", or "fp32 params under bf16 autocast
// (muster-train)".
std::string params_precision(const plan::job_plan& p) {
  if (p.request.memory.weights == plan::weight_layout::muster_train &&
      p.config.train.precision == "bf16")
    return "fp32 params under bf16 autocast (muster-train)";
  return p.config.train.precision + " params";
}

void print_memory(std::string& out, const plan::job_plan& p) {
  const auto& m = p.memory;
  const auto& t = p.config.train;
  fmt::format_to(std::back_inserter(out),
                 "\nmodel           {} parameters, {} active per token, {:.3g} training FLOPs "
                 "per token\n",
                 count(p.params.total), count(p.params.active),
                 static_cast<double>(p.flops_per_token));
  fmt::format_to(std::back_inserter(out),
                 "\nmemory per GPU  stage {} of {} (the largest); {}, {} grads, "
                 "recompute {}, sharding {}\n",
                 m.stage(), p.layout.pp(), params_precision(p), t.grad_reduce_dtype, t.recompute,
                 p.config.parallel.sharding);
  for (const auto& [name, bytes] : plan::memory_rows(m))
    fmt::format_to(std::back_inserter(out), "  {:<19} {:>12}\n", name, format_bytes(bytes));
  double pct = 100.0 * static_cast<double>(m.margin_bytes()) / static_cast<double>(m.gpu_memory_bytes);
  if (m.fits())
    fmt::format_to(std::back_inserter(out), "verdict: fits, {} ({:.0f}%) to spare on a {} GPU ({})\n",
                   format_bytes(m.margin_bytes()), pct, format_bytes(m.gpu_memory_bytes),
                   p.request.gpu_memory_source);
  else
    fmt::format_to(std::back_inserter(out), "verdict: does NOT fit: {} over a {} GPU ({})\n",
                   format_bytes(-m.margin_bytes()), format_bytes(m.gpu_memory_bytes),
                   p.request.gpu_memory_source);
}

// One comparison table: each setting's bytes of the categories `what` sums, and its total.
void print_variants(std::string& out, std::string_view title,
                    const std::vector<plan::variant_estimate>& rows,
                    std::int64_t (*what)(const plan::stage_memory&)) {
  fmt::format_to(std::back_inserter(out), "\n{}\n", title);
  for (const auto& row : rows)
    fmt::format_to(std::back_inserter(out), "  {:<56} {:>12}   total {:>12}  {}\n", row.setting,
                   format_bytes(what(row.worst)), format_bytes(row.worst.total_bytes()),
                   row.fits ? "fits" : "over");
}

std::int64_t model_state(const plan::stage_memory& m) {
  return m.params_bytes + m.grads_bytes + m.optimizer_bytes + m.fsdp_buffers_bytes;
}
std::int64_t activations(const plan::stage_memory& m) { return m.activations_bytes; }

void print_comparisons(std::string& out, const plan::job_plan& p) {
  print_variants(out, "by sharding strategy: params + grads + optimizer + FSDP buffers",
                 p.by_sharding, model_state);
  print_variants(out, "by recompute: activations", p.by_recompute, activations);
  print_variants(out, "by precision: params + grads + optimizer + FSDP buffers", p.by_precision,
                 model_state);
}

void print_fixes(std::string& out, const plan::job_plan& p) {
  if (p.fixes.empty()) {
    if (!p.fits())
      fmt::format_to(std::back_inserter(out),
                     "\nno change of batch, recompute, sharding or layout on {} ranks makes it "
                     "fit: use more GPUs or a GPU with more memory\n",
                     p.layout.world);
    return;
  }
  // a tight fit (plan::tight_fit) gets them too, for room to spare
  fmt::format_to(std::back_inserter(out), "\n{}, in the order the guides give:\n",
                 p.fits() ? "for more room to spare" : "to make it fit");
  int n = 1;
  for (const auto& f : p.fixes) {
    std::vector<std::string> words;
    for (const auto& o : f.overrides) words.push_back(shell_word(o));
    const auto spare = 100.0 * plan::spare_share(f.total_bytes, p.memory.gpu_memory_bytes);
    const auto verdict = p.fits()
                             ? fmt::format("{:.1f}% spare{}", spare, f.roomy ? "" : ", still tight")
                         : f.fits ? std::string("fits")
                                  : std::string("still over");
    fmt::format_to(std::back_inserter(out), "  {}. {}: {}\n     -> {} per GPU, {}\n", n++, f.what,
                   fmt::join(words, " "), format_bytes(f.total_bytes), verdict);
  }
  if (std::none_of(p.fixes.begin(), p.fixes.end(),
                   [&](const auto& f) { return p.fits() ? f.roomy : f.fits; }))
    fmt::format_to(std::back_inserter(out),
                   "none of these {}, alone or together, on {} ranks: use more GPUs or GPUs "
                   "with more memory\n",
                   p.fits() ? fmt::format("leaves {:.0f}% spare", 100 * plan::kTightMargin)
                            : std::string("fits"),
                   p.layout.world);
}

}  // namespace

std::string plan_text(const plan::job_plan& p, int sample_rank) {
  std::string out;
  print_layout(out, p);
  print_rank(out, p, 0);
  if (sample_rank != 0) print_rank(out, p, sample_rank);
  print_batch(out, p);
  print_memory(out, p);
  print_comparisons(out, p);
  for (const auto& w : p.warnings) fmt::format_to(std::back_inserter(out), "warning: {}\n", w);
  for (const auto& n : p.notes) fmt::format_to(std::back_inserter(out), "note: {}\n", n);
  print_fixes(out, p);
  return out;
}

}  // namespace muster::cli

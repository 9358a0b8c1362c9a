// The MoE block: see moe_block.hpp.
#include "engine/model/moe_block.hpp"

#include <cmath>

#include "common/error.hpp"
#include "engine/ops/grouped_linear_op.hpp"
#include "engine/ops/permute_op.hpp"
#include "engine/ops/router_op.hpp"
#include "engine/ops/swiglu_op.hpp"

namespace muster::engine::model {
namespace {

// Assignments per expert, (E) int64: torch::bincount without its host round trips (on a GPU
// it reads the ids' min and max back before counting, a stall at every router); `taken`
// (same shape as `experts`, bool) counts only where it is true.
torch::Tensor count_per_expert(const torch::Tensor& experts, std::int64_t num_experts,
                               const torch::Tensor& taken = {}) {
  const auto flat = experts.reshape({-1});
  const auto ones =
      taken.defined() ? taken.reshape({-1}).to(torch::kInt64) : torch::ones_like(flat);
  return torch::zeros({num_experts}, flat.options()).scatter_add_(0, flat, ones);
}

// Which assignments fit: each expert keeps its first `capacity` ones in token order. Each
// assignment's place among its expert's comes from a stable sort by expert, in T*k ids: a
// (T*k, E) one-hot and its running sum, as before, were 2 GiB at 65536 tokens, top 8 of 256.
// `counts`: the assignments per expert, (E).
torch::Tensor within_capacity(const torch::Tensor& experts, const torch::Tensor& counts,
                              std::int64_t capacity) {
  const auto flat = experts.reshape({-1});  // (T*k)
  const auto order = std::get<1>(flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const auto first = counts.cumsum(0) - counts;  // (E) each expert's first place in `order`
  const auto place = torch::arange(flat.numel(), flat.options()) -
                     first.index_select(0, flat.index_select(0, order));  // in sorted order
  const auto position = torch::empty_like(flat).scatter_(0, order, place);
  return (position < capacity).reshape(experts.sizes());
}

}  // namespace

routing route(const torch::Tensor& logits, const model_config& c, const router_group& group,
              bool defer_balance_loss) {
  const auto num_tokens = logits.size(0), num_experts = logits.size(1);
  const double all_tokens = double(num_tokens) * group.size;
  auto [scores, chosen, top] =
      ops::route_topk(logits, static_cast<int>(c.topk), c.sigmoid_router, c.topk_norm);
  routing r;
  r.experts = chosen;
  r.weights = top;
  r.kept = torch::ones_like(chosen, torch::kBool);
  const auto counts = count_per_expert(chosen, num_experts);
  auto all_assigned = counts.to(torch::kFloat64);
  if (group.start_sum) r.counts_summed = group.start_sum(all_assigned);  // every rank's counts
  if (c.capacity_factor > 0) {
    const auto capacity = static_cast<std::int64_t>(
        std::ceil(c.capacity_factor * double(num_tokens * c.topk) / double(num_experts)));
    r.kept = within_capacity(chosen, counts, capacity);
    r.weights = r.weights * r.kept;
  }
  r.tokens_per_expert =
      c.capacity_factor > 0 ? count_per_expert(chosen, num_experts, r.kept) : counts;
  // Load balance: on probabilities (sigmoid scores normalised per token, as Megatron does).
  auto probs = c.sigmoid_router ? scores / scores.sum(-1, true) : scores;
  const double scale =
      c.aux_loss_coeff * double(num_experts) / (all_tokens * all_tokens * double(c.topk));
  r.probs_sum = probs.sum(0);
  r.assigned = all_assigned;
  r.aux_scale = scale;
  // (no coefficient: no logsumexp and no backward of it, four kernels each way a layer)
  r.z_loss = c.z_loss_coeff > 0
                 ? torch::logsumexp(logits, -1).pow(2).sum() * (c.z_loss_coeff / all_tokens)
                 : torch::zeros({}, logits.options());
  if (!defer_balance_loss) finish_balance_loss(r);
  return r;
}

void finish_balance_loss(routing& r) {
  if (r.aux_loss.defined()) return;
  if (r.counts_summed) r.counts_summed();
  r.counts_summed = nullptr;
  r.aux_loss = (r.probs_sum * r.assigned.to(r.probs_sum.scalar_type())).sum() * r.aux_scale;
}

moe_block::moe_block(const model_config& c) : config_(c) {
  gate = register_module(
      "gate",
      torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, c.num_experts).bias(false)));
  const auto local = c.num_experts / c.ep_size;
  first_expert = c.ep_rank * local;
  auto holder = register_module("experts", std::make_shared<torch::nn::Module>());
  for (std::int64_t e = first_expert; e < first_expert + local; ++e) {
    experts.push_back(std::make_shared<swiglu>(c.hidden_size, c.moe_ffn_hidden_size));
    holder->register_module(std::to_string(e), experts.back());
  }
  if (c.shared_ffn_hidden_size > 0) {
    shared_expert = register_module(
        "shared_expert", std::make_shared<swiglu>(c.hidden_size, c.shared_ffn_hidden_size));
    if (c.shared_expert_gate)
      shared_expert_gate = register_module(
          "shared_expert_gate",
          torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, 1).bias(false)));
  }
}

moe_output moe_block::forward(const torch::Tensor& x) {
  const auto num_experts = config_.num_experts;
  // The router runs in fp32 at least (bf16 logits would flip close top-k choices).
  // Under bf16 autocast too: the router's linear is kept out of it.
  const auto router_dtype = c10::promoteTypes(x.scalar_type(), torch::kFloat32);
  torch::Tensor logits;
  {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    logits = torch::nn::functional::linear(x.to(router_dtype), gate->weight.to(router_dtype));
  }
  // The balance loss is finished at the end, after the experts ran while the counts travelled.
  moe_output out{torch::Tensor(), route(logits, config_, group_, /*defer_balance_loss=*/true)};
  // Group the kept assignments by expert, in assignment order within each (dropped ones get
  // no row), run the experts on the rows, and combine their rows back with the weights.
  const auto assigned = config_.capacity_factor > 0
                            ? out.how.experts.masked_fill(out.how.kept.logical_not(), -1)
                            : out.how.experts;  // every assignment kept
  const auto perm = ops::permute_index(assigned, num_experts);
  const auto* counts = perm.counts.data_ptr<std::int64_t>();  // on the host, read once
  auto rows = ops::permute_rows(x, perm);
  auto y = config_.ep_size == 1
               ? run_experts(rows, std::vector<std::int64_t>(counts, counts + num_experts))
               : dispatch(rows, counts);
  // the weights stay in the router's dtype: the combine of bf16 rows sums in fp32
  out.y = ops::unpermute_rows(y, perm, out.how.weights);
  if (shared_expert) {
    auto shared = shared_expert->forward(x);
    if (shared_expert_gate) shared = shared * torch::sigmoid(shared_expert_gate(x));
    out.y = out.y + shared;
  }
  finish_balance_loss(out.how);
  return out;
}

torch::Tensor moe_block::run_experts(const torch::Tensor& x,
                                     const std::vector<std::int64_t>& rows) {
  // Each projection of every expert as one grouped product over the expert-contiguous rows;
  // the gate and up projections as one, where each expert's lie end to end (as its FSDP unit
  // lays them): half the products and casts of the rows, and in backward one product gives
  // the rows' gradient from both (summed in the product's fp32, not after it).
  std::vector<torch::Tensor> gate, up, down, gate_up;
  for (const auto& expert : experts) {
    gate.push_back(expert->gate_proj->weight);
    up.push_back(expert->up_proj->weight);
    down.push_back(expert->down_proj->weight);
    gate_up.push_back(gate.back());
    gate_up.push_back(up.back());
  }
  const auto method = config_.expert_gemm;
  if (ops::projections_end_to_end(gate_up, 2))
    return ops::grouped_linear(
        ops::swiglu_rows(ops::grouped_linear(x, rows, gate_up, method, /*projections=*/2)), rows,
        down, method);
  return ops::grouped_linear(ops::swiglu(ops::grouped_linear(x, rows, gate, method),
                                         ops::grouped_linear(x, rows, up, method)),
                             rows, down, method);
}

torch::Tensor moe_block::dispatch(const torch::Tensor& rows, const std::int64_t* counts) {
  MUSTER_CHECK(experts_group_.all_to_all, errc::internal,
               "a MoE block with ep_size {} has no expert group", config_.ep_size);
  const int ep = config_.ep_size;
  const auto local = config_.num_experts / ep;
  std::vector<std::int64_t> send(static_cast<std::size_t>(ep), 0);
  for (std::int64_t e = 0; e < config_.num_experts; ++e)
    send[static_cast<std::size_t>(e / local)] += counts[e];
  // What each rank sends to each of this rank's experts: [rank][local expert].
  const auto theirs = experts_group_.all_to_all(
      torch::from_blob(const_cast<std::int64_t*>(counts), {config_.num_experts, 1}, torch::kInt64)
          .clone(),
      std::vector<std::int64_t>(static_cast<std::size_t>(ep), local),
      std::vector<std::int64_t>(static_cast<std::size_t>(ep), local));
  const auto* from = theirs.data_ptr<std::int64_t>();
  std::vector<std::int64_t> recv(static_cast<std::size_t>(ep), 0);
  std::vector<std::int64_t> start(static_cast<std::size_t>(ep * local));  // of [rank][expert]
  std::int64_t at = 0;
  for (int r = 0; r < ep; ++r)
    for (std::int64_t e = 0; e < local; ++e) {
      start[static_cast<std::size_t>(r * local + e)] = at;
      at += from[r * local + e];
      recv[static_cast<std::size_t>(r)] += from[r * local + e];
    }
  auto arrived = experts_group_.all_to_all(rows, send, recv);  // rank-major
  // Expert-major for the experts, and back.
  std::vector<std::int64_t> order, per_expert(static_cast<std::size_t>(local), 0);
  order.reserve(static_cast<std::size_t>(at));
  for (std::int64_t e = 0; e < local; ++e)
    for (int r = 0; r < ep; ++r) {
      const auto n = from[r * local + e], first = start[static_cast<std::size_t>(r * local + e)];
      for (std::int64_t i = 0; i < n; ++i) order.push_back(first + i);
      per_expert[static_cast<std::size_t>(e)] += n;
    }
  std::vector<std::int64_t> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<std::size_t>(order[i])] = std::int64_t(i);
  const auto by_expert = torch::tensor(order, torch::kInt64).to(rows.device());
  const auto by_rank = torch::tensor(inverse, torch::kInt64).to(rows.device());
  auto y = run_experts(arrived.index_select(0, by_expert), per_expert);
  return experts_group_.all_to_all(y.index_select(0, by_rank), recv, send);
}

}  // namespace muster::engine::model

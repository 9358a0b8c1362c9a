// The Mixture-of-Experts block: a router picks k of E SwiGLU experts per token, the experts'
// outputs are summed with the router's weights, plus an optional shared expert every token
// goes through. As in Qwen2/3-MoE and Mixtral (softmax router, optional top-k normalisation)
// and DeepSeek-V3 (sigmoid router). Dropless by default; with a capacity factor each expert
// takes at most ceil(factor * tokens * k / E) assignments, in token order, and the rest are
// dropped (their weight is lost, the token keeps its residual).
// Auxiliary losses, already multiplied by their coefficients: the load-balancing loss in
// Switch/GShard form as Megatron computes it, E / (T^2 k) * sum_e P_e * f_e (P_e: the summed
// router probability of expert e, f_e: the assignments it got; equals the coefficient when the
// router is uniform), and the router z-loss, mean over tokens of logsumexp(logits)^2.
// Parameters as Hugging Face's Qwen-MoE names them: gate (E x hidden: the router),
// experts.<e>.{gate,up,down}_proj, shared_expert.{gate,up,down}_proj, shared_expert_gate
// (1 x hidden).
// Under expert parallelism (model_config.ep_size > 1) the block holds only this rank's experts
// (named by their global index) and sends each routed token row to the rank of its expert with an
// all-to-all, and the expert outputs back with a second one; the collective itself comes from
// the caller (expert_group, engine/parallel/expert_dispatch.hpp).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "engine/model/model_config.hpp"
#include "engine/model/swiglu.hpp"

namespace muster::engine::model {

// Where each token goes. T tokens, k choices each, E experts.
struct routing {
  torch::Tensor experts;            // (T, k) int64: the chosen experts, best first
  torch::Tensor weights;            // (T, k) fp32: their combine weights
  torch::Tensor kept;               // (T, k) bool: false for an assignment over capacity
  torch::Tensor tokens_per_expert;  // (E) int64: assignments each expert takes (kept ones)
  torch::Tensor aux_loss;           // scalar, times its coefficient (see finish_balance_loss)
  torch::Tensor z_loss;             // scalar, times its coefficient
  // The balance loss's parts while every rank's counts are still being summed: aux_loss is
  // sum(probs_sum * assigned) * aux_scale once `counts_summed` returned.
  std::function<void()> counts_summed;
  torch::Tensor probs_sum;  // (E), with its gradient
  torch::Tensor assigned;   // (E) fp64, summed over the group in place
  double aux_scale = 0;
};

// The data-parallel ranks whose tokens the router losses are taken over: the balance loss
// uses every rank's assignment counts and the token count of all of them, and each rank
// returns its share of both losses, so the shares (and their gradients) summed over the ranks
// are the losses of all their tokens together, as if one rank had seen them. `start_sum`
// starts adding a tensor over the ranks in place and returns what waits for it (a collective:
// every rank routes the same layers in the same order), so a rank computes its experts while
// the counts travel and the ranks do not wait for each other at every router; without it the
// losses are this rank's alone. Every rank routes as many tokens.
struct router_group {
  std::function<std::function<void()>(torch::Tensor&)> start_sum;
  int size = 1;
};

// The expert-parallel ranks: `all_to_all` sends rows (dim 0) of a tensor to the ranks of the
// group, send[r] of them to rank r, and returns recv[r] rows from each rank in rank order,
// differentiably (its backward is the reverse all-to-all). A collective: every rank of the group
// dispatches the same layers in the same order.
struct expert_group {
  std::function<torch::Tensor(const torch::Tensor&, const std::vector<std::int64_t>&,
                              const std::vector<std::int64_t>&)>
      all_to_all;
};

// Routes by `logits` (T, E), computed in fp32 (or fp64) by the caller. With
// `defer_balance_loss` the group's sum of the counts is left running and aux_loss undefined
// until finish_balance_loss().
routing route(const torch::Tensor& logits, const model_config& c, const router_group& group = {},
              bool defer_balance_loss = false);
// Waits for the counts of every rank and sets r.aux_loss; a no-op once it is set.
void finish_balance_loss(routing& r);

struct moe_output {
  torch::Tensor y;  // (T, hidden)
  routing how;
};

class moe_block : public torch::nn::Module {
 public:
  explicit moe_block(const model_config& c);
  // x is (T, hidden)
  moe_output forward(const torch::Tensor& x);
  void set_router_group(router_group group) { group_ = std::move(group); }
  // Needed when model_config.ep_size > 1.
  void set_expert_group(expert_group group) { experts_group_ = std::move(group); }

  torch::nn::Linear gate{nullptr};
  std::vector<std::shared_ptr<swiglu>> experts;   // this rank's: global index first_expert + i
  std::int64_t first_expert = 0;
  std::shared_ptr<swiglu> shared_expert;          // null without one
  torch::nn::Linear shared_expert_gate{nullptr};  // null without the gate

 private:
  // The routed rows through this rank's experts: `x` holds the rows in expert order (rows[e] of
  // them for local expert e); returns the outputs in the same order.
  torch::Tensor run_experts(const torch::Tensor& x, const std::vector<std::int64_t>& rows);
  // The experts' outputs of `x`'s kept assignments, rows in expert order, through the
  // expert-parallel group.
  torch::Tensor dispatch(const torch::Tensor& rows, const std::int64_t* counts);

  model_config config_;
  router_group group_;
  expert_group experts_group_;
};

}  // namespace muster::engine::model

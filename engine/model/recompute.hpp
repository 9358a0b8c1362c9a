// Activation recompute (Megatron's "activation checkpointing"): run a piece of the forward
// without keeping its activations, and run it again in backward to get them back.
//
//   auto outs = recompute([&](const variable_list& in) { return f(in); }, inputs);
//
// Forward runs f under no_grad, so nothing inside f is saved for backward; one autograd node
// keeps f and its inputs. Its backward runs f again with gradients on, then backward over that
// small graph from the outputs' gradients: parameters f uses get theirs accumulated there, and
// the inputs' gradients flow on. f must compute the same thing twice: no dropout here, and its
// collectives (the expert all-to-all) must repeat in the same order on every rank, which holds
// because every rank runs its backward in the same layer order.
// train.recompute = selective wraps the attention core (the scores and probabilities, the
// biggest activations at long sequence), full wraps whole decoder layers.
#pragma once

#include <functional>

#include <torch/torch.h>

namespace muster::engine::model {

using recompute_fn = std::function<torch::autograd::variable_list(
    const torch::autograd::variable_list&)>;

// f's outputs must be new tensors (not inputs, nor views of them).
torch::autograd::variable_list recompute(recompute_fn f, const torch::autograd::variable_list& inputs);

}  // namespace muster::engine::model

// Tensor names between the engine and Hugging Face checkpoints. The engine names parameters as
// Hugging Face's Qwen-MoE implementation does without the leading "model." (lm_head.weight
// stays as it is); it saves under Qwen's names and loads Qwen's or Mixtral's
// (block_sparse_moe.gate -> mlp.gate, block_sparse_moe.experts.E.{w1, w3, w2} ->
// mlp.experts.E.{gate_proj, up_proj, down_proj}).
#pragma once

#include <string>
#include <string_view>

namespace muster::engine::checkpoint {

// "layers.0.mlp.gate.weight" -> "model.layers.0.mlp.gate.weight"; "lm_head.weight" as is.
std::string to_hf_name(std::string_view ours);
// The inverse, Mixtral's names included; a name outside the model (rotary inv_freq buffers some
// checkpoints carry) comes back unchanged and matches no parameter.
std::string from_hf_name(std::string_view hf);

}  // namespace muster::engine::checkpoint

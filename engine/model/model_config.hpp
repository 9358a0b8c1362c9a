// The model as the engine builds it: the job file's model section resolved (head size, which
// layers are MoE, by the planner's rule so the two never disagree) and checked for what the
// engine supports. Pure, no LibTorch.
// Not here: the sizes' own validation (common/job_config.cpp), the parallel layout.
#pragma once

#include <cstdint>
#include <vector>

#include "common/job_config.hpp"
#include "muster/kernels/grouped_gemm.hpp"

namespace muster::engine::model {

struct model_config {
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;      // dense layers' SwiGLU
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;         // grouped-query attention
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  bool qk_norm = false;
  bool attention_bias = false;
  bool tie_embeddings = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  // MoE
  std::int64_t num_experts = 0;          // 0: every layer dense
  // Expert parallelism: the experts are divided over ep_size ranks, and this rank (ep_rank)
  // builds only experts [ep_rank*E/ep_size, (ep_rank+1)*E/ep_size) of each MoE layer.
  int ep_size = 1, ep_rank = 0;
  std::int64_t moe_ffn_hidden_size = 0;
  std::int64_t topk = 0;
  bool topk_norm = true;
  bool sigmoid_router = false;           // else softmax
  double aux_loss_coeff = 0.0;
  double z_loss_coeff = 0.0;
  double capacity_factor = 0.0;          // 0: dropless
  std::int64_t shared_ffn_hidden_size = 0;
  bool shared_expert_gate = false;
  std::vector<bool> moe_layers;          // per layer: an MoE block instead of a dense MLP
  bool recompute_attention_core = false; // train.recompute = selective (model/recompute.hpp)
  // train.expert_gemm: how a GPU runs the experts' products (kernels/cuda/grouped_gemm.cpp)
  kernels::cuda::grouped_gemm_method expert_gemm = kernels::cuda::grouped_gemm_method::automatic;
  // Parameters as shapes without memory (what PyTorch's meta device is for; LibTorch 1.13 cannot
  // turn a meta parameter into a CPU one in place, so they are CPU tensors whose storage is
  // dropped). Each piece drops its storage as soon as it is built, so building holds at most
  // one layer; the sharding units materialise this rank's shards (engine/parallel/flat_unit).
  bool shapes_only = false;
};

// The engine's model from a validated job file section. Throws errc::invalid_input naming the
// key for what the engine cannot build yet (multi-latent attention).
model_config make_model_config(const model_section& m);

// train.expert_gemm's method (a value validate() accepted).
kernels::cuda::grouped_gemm_method expert_gemm_method(const std::string& value);

}  // namespace muster::engine::model

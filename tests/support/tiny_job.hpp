// The smallest MoE job the engine trains in a test: 2 layers, hidden 32, 4 experts top-2,
// rows of 64 bytes, 2 a step, fp32; `steps` steps. The [model] and [train] sections of a job
// file, for tests to add their own sections to.
#pragma once

#include <string>

namespace muster::test {

inline std::string tiny_job(int steps) {
  return R"([model]
num_layers = 2
hidden_size = 32
ffn_hidden_size = 64
num_attention_heads = 4
num_query_groups = 2
num_experts = 4
moe_ffn_hidden_size = 32
moe_router_topk = 2
[train]
micro_batch_size = 2
seq_length = 64
max_tokens_per_pack = 64
steps = )" + std::to_string(steps) +
         R"(
precision = "fp32"
)";
}

}  // namespace muster::test

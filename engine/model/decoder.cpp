// The decoder-only transformer: see decoder.hpp.
#include "engine/model/decoder.hpp"

#include "engine/model/param_storage.hpp"
#include "engine/ops/linear_op.hpp"

namespace muster::engine::model {

decoder_layer::decoder_layer(const model_config& c, std::int64_t index) {
  input_layernorm =
      register_module("input_layernorm", std::make_shared<rms_norm>(c.hidden_size, c.norm_eps));
  self_attn = register_module("self_attn", std::make_shared<attention>(c));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", std::make_shared<rms_norm>(c.hidden_size, c.norm_eps));
  if (c.moe_layers.at(static_cast<std::size_t>(index)))
    moe = register_module("mlp", std::make_shared<moe_block>(c));
  else
    mlp = register_module("mlp", std::make_shared<swiglu>(c.hidden_size, c.ffn_hidden_size));
}

torch::Tensor decoder_layer::forward(const torch::Tensor& x, const rotary_tables& rope,
                                     const torch::Tensor& mask, moe_losses& losses) {
  auto h = x + self_attn->forward(input_layernorm->forward(x), rope, mask);
  auto normed = post_attention_layernorm->forward(h);
  if (mlp) return h + mlp->forward(normed);
  const auto shape = normed.sizes().vec();
  auto out = moe->forward(normed.reshape({-1, shape.back()}));
  losses.aux = losses.aux + out.how.aux_loss;
  losses.z = losses.z + out.how.z_loss;
  return h + out.y.view(shape);
}

transformer::transformer(const model_config& c) : config_(c) {
  auto place = [&](torch::nn::Module& m) {
    if (!c.shapes_only) return;
    for (auto& p : m.parameters()) free_storage(p);
  };
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  place(*embed_tokens);
  auto list = register_module("layers", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    layers.push_back(std::make_shared<decoder_layer>(c, i));
    place(*layers.back());
    list->push_back(layers.back());
  }
  norm = register_module("norm", std::make_shared<rms_norm>(c.hidden_size, c.norm_eps));
  place(*norm);
  if (!c.tie_embeddings) {
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, c.vocab_size).bias(false)));
    place(*lm_head);
  }
}

torch::Tensor transformer::embed(const torch::Tensor& tokens) { return embed_tokens(tokens); }

transformer::batch_context transformer::context(const torch::Tensor& positions,
                                                const torch::Tensor& segments,
                                                torch::ScalarType dtype) const {
  return {make_rotary(positions, config_.head_dim, config_.rope_theta, dtype),
          attention_mask(segments)};
}

torch::Tensor transformer::head(const torch::Tensor& x) {
  auto normed = norm->forward(x);
  return lm_head ? ops::linear(normed, lm_head) : ops::linear(normed, embed_tokens->weight);
}

transformer_output transformer::forward(const torch::Tensor& tokens,
                                        const torch::Tensor& positions,
                                        const torch::Tensor& segments) {
  auto x = embed(tokens);
  const auto ctx = context(positions, segments, x.scalar_type());
  auto zero = torch::zeros({}, x.options().dtype(torch::kFloat32));
  transformer_output out{{}, {zero, zero}};
  for (auto& layer : layers) x = layer->forward(x, ctx.rope, ctx.mask, out.losses);
  out.logits = head(x);
  return out;
}

void transformer::set_router_group(const router_group& group) {
  for (auto& layer : layers)
    if (layer->moe) layer->moe->set_router_group(group);
}

void transformer::set_expert_group(const expert_group& group) {
  for (auto& layer : layers)
    if (layer->moe) layer->moe->set_expert_group(group);
}

torch::Tensor token_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
}

}  // namespace muster::engine::model

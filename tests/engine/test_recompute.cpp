// Activation recompute (engine/model/recompute.hpp): a decoder layer run through recompute
// gives the same output, input gradient and parameter gradients as the layer run plainly,
// and keeps none of the layer's activations alive between forward and backward.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include "engine/model/attention.hpp"
#include "engine/model/decoder.hpp"
#include "engine/model/init.hpp"
#include "engine/model/recompute.hpp"
#include "tests/engine/model_fixtures.hpp"

using namespace muster::engine::model;
using muster::test::tiny_config;

namespace {

struct result {
  torch::Tensor out, aux, dx;
  std::vector<torch::Tensor> grads;
};

result run(const model_config& c, bool full) {
  torch::manual_seed(3);
  auto layer = std::make_shared<decoder_layer>(c, 0);
  init_parameters(*layer, 11, 0.1);
  auto x = torch::randn({2, 16, c.hidden_size}).requires_grad_(true);
  const auto rope = make_rotary(torch::arange(16).repeat({2, 1}), c.head_dim, c.rope_theta,
                                torch::kFloat32);
  const auto mask = attention_mask(torch::zeros({2, 16}, torch::kInt64));
  auto f = [&](const torch::autograd::variable_list& in) -> torch::autograd::variable_list {
    auto zero = torch::zeros({});
    moe_losses losses{zero, zero + 0};
    auto y = layer->forward(in[0], rope, mask, losses);
    return {y, losses.aux};
  };
  auto outs = full ? recompute(f, {x}) : f({x});
  (outs[0].square().sum() + outs[1] * 10).backward();
  result r{outs[0].detach(), outs[1].detach(), x.grad(), {}};
  for (auto& p : layer->parameters()) r.grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  return r;
}

void check_same(const result& a, const result& b) {
  CHECK(torch::allclose(a.out, b.out, 1e-6, 1e-7));
  CHECK(torch::allclose(a.aux, b.aux, 1e-6, 1e-7));
  CHECK(torch::allclose(a.dx, b.dx, 1e-5, 1e-7));
  REQUIRE(a.grads.size() == b.grads.size());
  for (std::size_t i = 0; i < a.grads.size(); ++i) CHECK(torch::allclose(a.grads[i], b.grads[i], 1e-5, 1e-7));
}

}  // namespace

TEST_CASE("full recompute of an MoE layer gives its outputs and every gradient", "[recompute]") {
  auto c = tiny_config();
  check_same(run(c, false), run(c, true));
}

TEST_CASE("selective recompute of the attention core gives every gradient", "[recompute]") {
  auto c = tiny_config();
  auto plain = run(c, false);
  c.recompute_attention_core = true;
  check_same(plain, run(c, false));
  check_same(plain, run(c, true));  // both at once nest
}

TEST_CASE("recompute keeps only its inputs for backward", "[recompute]") {
  auto x = torch::randn({64, 64}).requires_grad_(true);
  auto w = torch::randn({64, 64}).requires_grad_(true);
  int calls = 0;
  auto f = [&](const torch::autograd::variable_list& in) -> torch::autograd::variable_list {
    ++calls;
    return {torch::tanh(torch::mm(in[0], w)).exp()};
  };
  auto y = recompute(f, {x})[0];
  CHECK(calls == 1);
  CHECK(y.grad_fn()->name() == "muster::RecomputeBackward");
  CHECK(y.grad_fn()->next_edges().size() == 1);  // x only: nothing of f's graph is kept
  y.sum().backward();
  CHECK(calls == 2);
  REQUIRE(w.grad().defined());
  auto x2 = x.detach().requires_grad_(true);
  auto w2 = w.detach().requires_grad_(true);
  torch::tanh(torch::mm(x2, w2)).exp().sum().backward();
  CHECK(torch::allclose(x.grad(), x2.grad()));
  CHECK(torch::allclose(w.grad(), w2.grad()));
}

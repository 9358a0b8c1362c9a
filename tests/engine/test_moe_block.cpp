// The MoE block on the CPU: its auxiliary losses by their definitions, capacity dropping, the
// grouped dispatch against a token-by-token reference, and its gradients against finite
// differences (fp64).
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <cmath>

#include "engine/model/init.hpp"
#include "engine/model/moe_block.hpp"
#include "tests/engine/model_fixtures.hpp"

using namespace muster::engine::model;
using muster::test::tiny_config;

namespace {

std::shared_ptr<moe_block> block(const model_config& c, std::uint64_t seed = 5) {
  auto b = std::make_shared<moe_block>(c);
  init_parameters(*b, seed, 0.3);  // large weights: routing far from ties
  b->to(torch::kFloat64);
  return b;
}

}  // namespace

TEST_CASE("a uniform router: the balance loss is its coefficient, the z-loss coeff*log(E)^2",
          "[moe]") {
  auto c = tiny_config();
  auto logits = torch::zeros({10, 4}, torch::kFloat64);
  auto r = route(logits, c);
  CHECK(r.aux_loss.item<double>() == Approx(c.aux_loss_coeff).epsilon(1e-12));
  CHECK(r.z_loss.item<double>() == Approx(c.z_loss_coeff * std::log(4.0) * std::log(4.0)));
  CHECK(r.tokens_per_expert.sum().item<std::int64_t>() == 20);
}

TEST_CASE("top-k weights sum to 1 with normalisation, are the probabilities without", "[moe]") {
  auto c = tiny_config();
  torch::manual_seed(2);
  auto logits = torch::randn({6, 4}, torch::kFloat64);
  auto normed = route(logits, c);
  CHECK(torch::allclose(normed.weights.sum(-1), torch::ones({6}, torch::kFloat64)));
  c.topk_norm = false;
  auto raw = route(logits, c);
  auto probs = torch::softmax(logits, -1).gather(1, raw.experts);
  CHECK(torch::allclose(raw.weights, probs));
  CHECK(torch::equal(raw.experts, normed.experts));
}

TEST_CASE("with a capacity factor each expert keeps its first assignments in token order",
          "[moe]") {
  auto c = tiny_config();
  c.capacity_factor = 1.0;  // capacity = ceil(1 * 8 tokens * 2 / 4 experts) = 4
  auto b = block(c);
  torch::NoGradGuard no_grad;
  b->gate->weight.zero_();
  b->gate->weight.index_put_({0}, 1.0);  // every token prefers expert 0, then 1
  b->gate->weight.index_put_({1}, 0.5);
  auto x = torch::ones({8, 16}, torch::kFloat64);
  auto out = b->forward(x);
  auto kept = out.how.kept.to(torch::kInt64);
  CHECK(torch::equal(kept.sum(1), torch::tensor({2, 2, 2, 2, 0, 0, 0, 0})));
  CHECK(torch::equal(out.how.tokens_per_expert, torch::tensor({4, 4, 0, 0})));
  CHECK(out.y.narrow(0, 4, 4).abs().sum().item<double>() == 0.0);  // dropped: no expert output
  CHECK(out.y.narrow(0, 0, 4).abs().sum().item<double>() > 0.0);
}

TEST_CASE("capacity keeps each expert's first assignments in token order, at any size", "[moe]") {
  auto c = tiny_config();
  for (const double factor : {0.5, 1.0, 1.5}) {
    c.capacity_factor = factor;
    torch::manual_seed(7);
    const std::int64_t tokens = 333;
    const auto logits = torch::randn({tokens, c.num_experts}, torch::kFloat64);
    const auto r = route(logits, c);
    // by the definition: an assignment's place among its expert's, counted in token order
    const auto flat = r.experts.reshape({-1});
    const auto place =
        torch::one_hot(flat, c.num_experts).cumsum(0).gather(1, flat.unsqueeze(1)) - 1;
    const auto capacity = static_cast<std::int64_t>(
        std::ceil(factor * double(tokens * c.topk) / double(c.num_experts)));
    INFO("capacity factor " << factor << ": " << capacity << " a expert");
    CHECK(torch::equal(r.kept.reshape({-1, 1}), place < capacity));
    CHECK(r.kept.logical_not().any().item<bool>() == (factor < 1.5));  // some dropped
  }
}

TEST_CASE("the grouped dispatch equals routing token by token", "[moe]") {
  auto c = tiny_config();
  c.shared_ffn_hidden_size = 8;
  c.shared_expert_gate = true;
  auto b = block(c);
  torch::manual_seed(3);
  auto x = torch::randn({9, 16}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  auto out = b->forward(x);
  for (std::int64_t t = 0; t < 9; ++t) {
    auto xt = x.narrow(0, t, 1);
    auto expected = b->shared_expert->forward(xt) * torch::sigmoid(b->shared_expert_gate(xt));
    for (std::int64_t j = 0; j < c.topk; ++j) {
      const auto e = out.how.experts[t][j].item<std::int64_t>();
      expected = expected + out.how.weights[t][j] * b->experts[static_cast<std::size_t>(e)]->forward(xt);
    }
    CHECK(torch::allclose(out.y.narrow(0, t, 1), expected, 1e-12, 1e-12));
  }
}

TEST_CASE("MoE gradients match central finite differences in fp64", "[moe]") {
  auto c = tiny_config();
  c.shared_ffn_hidden_size = 8;
  c.shared_expert_gate = true;
  auto b = block(c, 11);
  torch::manual_seed(4);
  auto x = torch::randn({7, 16}, torch::kFloat64).requires_grad_(true);
  auto probe = torch::randn({7, 16}, torch::kFloat64);
  auto loss_of = [&] {
    auto out = b->forward(x);
    return (out.y * probe).sum() + out.how.aux_loss + out.how.z_loss;
  };
  loss_of().backward();
  std::vector<std::pair<std::string, torch::Tensor>> checked = {{"input", x}};
  for (auto& p : b->named_parameters()) checked.emplace_back(p.key(), p.value());
  const double h = 1e-6;
  for (auto& [name, t] : checked) {
    INFO(name);
    REQUIRE(t.grad().defined());
    auto flat = t.data().view({-1});
    auto grad = t.grad().view({-1});
    for (std::int64_t i = 0; i < flat.numel(); i += std::max<std::int64_t>(1, flat.numel() / 5)) {
      torch::NoGradGuard no_grad;
      const double saved = flat[i].item<double>();
      flat[i] = saved + h;
      const double up = loss_of().item<double>();
      flat[i] = saved - h;
      const double down = loss_of().item<double>();
      flat[i] = saved;
      const double numeric = (up - down) / (2 * h);
      CHECK(grad[i].item<double>() == Approx(numeric).epsilon(1e-5).margin(1e-8));
    }
  }
}

TEST_CASE("router losses over a group of ranks: the shares add up to the losses of all tokens",
          "[moe]") {
  auto c = tiny_config();
  torch::manual_seed(6);
  auto all = torch::randn({8, 4}, torch::kFloat64);
  auto first = all.narrow(0, 0, 4), second = all.narrow(0, 4, 4);
  // each "rank" learns the other's expert counts through the group's sum
  auto counts = [&](const torch::Tensor& logits) {
    return route(logits, c).tokens_per_expert.to(torch::kFloat64);
  };
  // the sum arrives when waited for, as a collective left running does
  auto sum_with = [&](const torch::Tensor& other) {
    return router_group{[&, other](torch::Tensor& t) -> std::function<void()> {
                          return [t, add = counts(other)]() mutable { t += add; };
                        },
                        2};
  };
  auto a = route(first, c, sum_with(second));
  auto b = route(second, c, sum_with(first), /*defer_balance_loss=*/true);
  CHECK_FALSE(b.aux_loss.defined());  // until the counts are in
  finish_balance_loss(b);
  auto whole = route(all, c);
  CHECK((a.aux_loss + b.aux_loss).item<double>() == Approx(whole.aux_loss.item<double>()).epsilon(1e-12));
  CHECK((a.z_loss + b.z_loss).item<double>() == Approx(whole.z_loss.item<double>()).epsilon(1e-12));
}

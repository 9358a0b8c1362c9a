// One sharding unit on one rank: the parameters become views of its flat buffer, their
// gradients land in it, weight decay is masked off norms and biases; and the storage trick the
// gathered buffers use: a view taken before the storage is freed reads and writes the buffer
// its storage then borrows; a unit materialising parameters built as shapes only; and an
// experts' unit whose gate and up projections the MoE block runs as one product, and a layer's
// unit whose q, k and v projections, and gate and up, run as one product each.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <set>

#include <catch2/catch.hpp>

#include "engine/model/decoder.hpp"
#include "engine/model/init.hpp"
#include "engine/model/moe_block.hpp"
#include "engine/ops/grouped_linear_op.hpp"
#include "engine/ops/stacked_view.hpp"
#include "engine/parallel/flat_adamw.hpp"
#include "engine/parallel/flat_unit.hpp"
#include "tests/engine/count_handed.hpp"
#include "tests/engine/model_fixtures.hpp"
#include "tests/engine/relative_error.hpp"

using namespace muster::engine;
using muster::test::relative_error;

TEST_CASE("a view of a borrowed storage reads and writes the lender's memory until freed",
          "[sharding]") {
  auto whole = torch::arange(6, torch::kFloat32);
  auto view = whole.narrow(0, 2, 3);
  model::free_storage(whole);
  auto lender = torch::arange(10, 18, torch::kFloat32);  // larger than the borrower: fine
  model::borrow_storage(whole, lender);
  CHECK(view.equal(torch::tensor({12.f, 13.f, 14.f})));
  view.fill_(0);
  CHECK(lender.equal(torch::tensor({10.f, 11.f, 0.f, 0.f, 0.f, 15.f, 16.f, 17.f})));
  model::free_storage(whole);
  CHECK_FALSE(model::materialised(whole));
  CHECK(lender[2].item<float>() == 0);  // the lender's memory stays its own
  CHECK_THROWS_WITH(model::borrow_storage(whole, torch::zeros({5})),
                    Catch::Contains("a storage of 24 B on cpu borrowed from 20 B on cpu"));
}

TEST_CASE("a unit's parameters are views of its buffer and their gradients land in its shard",
          "[sharding]") {
  auto linear = torch::nn::Linear(torch::nn::LinearOptions(3, 2).bias(true));
  auto norm = torch::ones({3}, torch::requires_grad());
  const auto weight_before = linear->weight.detach().clone();
  parallel::unit_options options;
  options.name = "test";
  options.strategy = parallel::sharding::optim_grads_params;
  parallel::flat_unit unit(options, {{"proj.weight", linear->weight},
                                     {"proj.bias", linear->bias},
                                     {"input_layernorm.weight", norm}});
  // alone, every strategy is no_shard: one whole shard
  CHECK(unit.strategy() == parallel::sharding::no_shard);
  CHECK(unit.numel() == 6 + 2 + 3);
  CHECK(unit.shard_numel() == 11);
  CHECK(linear->weight.equal(weight_before));
  CHECK(linear->weight.data_ptr<float>() == unit.shard().data_ptr<float>());
  CHECK(unit.decay_mask().equal(
      torch::tensor({1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 0.f, 0.f, 0.f, 0.f, 0.f})));

  auto x = torch::ones({1, 3});
  (linear(x * norm).sum()).backward();
  // d/dW of sum(W x + b) is x for each row; d/db is 1; d/dnorm is the column sums of W
  auto expected = torch::cat({torch::ones({6}), torch::ones({2}), weight_before.sum(0)});
  CHECK(torch::allclose(unit.shard_grad(), expected));
  unit.zero_grad();
  CHECK(unit.shard_grad().abs().sum().item<float>() == 0);
  {
    torch::NoGradGuard no_grad;
    unit.shard().add_(1);  // the optimizer moves the shard: the module sees it
  }
  CHECK(torch::allclose(linear->weight, weight_before + 1));
}

TEST_CASE("a unit built from parameters without values holds the values init_parameters gives",
          "[sharding]") {
  auto c = muster::test::tiny_config();
  auto real = std::make_shared<model::decoder_layer>(c, 0);
  model::init_parameters(*real, 9);
  auto meta = std::make_shared<model::decoder_layer>(c, 0);
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (auto& p : meta->named_parameters()) {
    model::free_storage(p.value());
    CHECK_FALSE(model::materialised(p.value()));
    params.emplace_back(p.key(), p.value());
  }
  parallel::unit_options options;
  options.name = "layers.0";
  options.init = [](const std::string& name, torch::Tensor& whole) {
    model::init_parameter(name, whole, 9);
  };
  parallel::flat_unit unit(options, std::move(params));
  const auto want = real->named_parameters(), got = meta->named_parameters();
  for (const auto& p : want) {
    INFO(p.key());
    CHECK(model::materialised(got[p.key()]));
    CHECK(got[p.key()].equal(p.value()));
  }
}

TEST_CASE("flat_adamw over a unit follows torch::optim::AdamW, norms undecayed", "[sharding]") {
  torch::manual_seed(3);
  auto weight = torch::randn({70, 33}), norm = torch::randn({33});
  auto ref_weight = weight.clone().requires_grad_(true),
       ref_norm = norm.clone().requires_grad_(true);
  weight.requires_grad_(true);
  norm.requires_grad_(true);
  parallel::unit_options options;
  options.name = "test";
  parallel::flat_unit unit(options, {{"proj.weight", weight}, {"input_layernorm.weight", norm}});
  muster::train_section train;
  train.adam_beta2 = 0.95;
  parallel::flat_adamw adam({&unit}, train);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      std::vector<torch::Tensor>{ref_weight},
      std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1)));
  groups.emplace_back(
      std::vector<torch::Tensor>{ref_norm},
      std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0)));
  torch::optim::AdamW reference(std::move(groups));
  for (int step = 0; step < 3; ++step) {
    unit.zero_grad();
    reference.zero_grad();
    auto x = torch::randn({5, 70});
    (x.matmul(weight) * norm).pow(2).sum().backward();
    (x.matmul(ref_weight) * ref_norm).pow(2).sum().backward();
    // the global norm, as torch.nn.utils.clip_grad_norm_ computes it
    const double ref_norm_of_grads =
        torch::cat({ref_weight.grad().reshape({-1}), ref_norm.grad()}).norm().item<double>();
    CHECK(parallel::global_grad_norm({&unit}, nullptr) == Approx(ref_norm_of_grads).epsilon(1e-6));
    adam.step(1e-2);
    reference.step();
    CHECK(torch::allclose(weight, ref_weight, 1e-5, 1e-6));
    CHECK(torch::allclose(norm, ref_norm, 1e-5, 1e-6));
  }
}

// grouped_linear's one-kernel casts and gradient sums (engine/ops/stacked_view.hpp) need each
// projection's expert weights, and their gradients, at one stride in the experts' unit.
TEST_CASE("an experts' unit lays each projection's weights and gradients at one stride",
          "[sharding]") {
  model::moe_block block(muster::test::tiny_config());
  std::vector<std::pair<std::string, torch::Tensor>> experts;
  for (auto& p : block.named_parameters())
    if (p.key().starts_with("experts.")) experts.emplace_back(p.key(), p.value());
  REQUIRE(experts.size() == 3 * block.experts.size());
  parallel::unit_options options;
  options.name = "layers.1.experts";
  parallel::flat_unit unit(options, std::move(experts));
  std::vector<torch::Tensor> gate, up, down;
  for (const auto& e : block.experts) {
    gate.push_back(e->gate_proj->weight);
    up.push_back(e->up_proj->weight);
    down.push_back(e->down_proj->weight);
  }
  for (const auto* projection : {&gate, &up, &down}) {
    const auto all = ops::stacked_view(*projection);
    REQUIRE(all.defined());
    for (std::size_t e = 0; e < projection->size(); ++e)
      CHECK(all[std::int64_t(e)].data_ptr() == (*projection)[e].data_ptr());
    std::vector<torch::Tensor> grads;
    for (const auto& w : *projection) grads.push_back(w.grad());
    CHECK(ops::stacked_view(grads).defined());
  }
}

// In an experts' unit each expert's gate and up lie end to end, so the block runs them as one
// stacked product (grouped_linear's projections = 2, then SwiGLU over packed rows) and adds their
// gradients where the unit keeps them; the same block with its experts as separate tensors runs
// the two products apart. Same outputs and gradients, over two backward passes that accumulate.
TEST_CASE("an experts' unit runs each expert's gate and up as one product, as apart gives",
          "[sharding][moe]") {
  const auto c = muster::test::tiny_config();
  model::moe_block flat(c), apart(c);
  model::init_parameters(flat, 9, 0.3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : apart.named_parameters()) p.value().copy_(flat.named_parameters()[p.key()]);
  }
  std::vector<std::pair<std::string, torch::Tensor>> experts;
  for (auto& p : flat.named_parameters())
    if (p.key().starts_with("experts.")) experts.emplace_back(p.key(), p.value());
  parallel::unit_options options;
  options.name = "layers.1.experts";
  parallel::flat_unit unit(options, std::move(experts));
  const auto gate_up = [](model::moe_block& b) {
    std::vector<torch::Tensor> ws;
    for (const auto& e : b.experts) {
      ws.push_back(e->gate_proj->weight);
      ws.push_back(e->up_proj->weight);
    }
    return ws;
  };
  REQUIRE(ops::projections_end_to_end(gate_up(flat), 2));
  REQUIRE_FALSE(ops::projections_end_to_end(gate_up(apart), 2));
  int handed = 0;  // gradients autograd handed to the unit's gate and up (none: added in place)
  for (auto& w : gate_up(flat)) muster::test::count_handed(w, handed);
  torch::manual_seed(3);
  const auto x0 = torch::randn({12, c.hidden_size});
  const auto g = torch::randn({12, c.hidden_size});
  auto x_flat = x0.clone().requires_grad_(true), x_apart = x0.clone().requires_grad_(true);
  for (int pass = 0; pass < 2; ++pass) {
    const auto y_flat = flat.forward(x_flat).y, y_apart = apart.forward(x_apart).y;
    CHECK(torch::allclose(y_flat, y_apart, 1e-6, 1e-6));
    (y_flat * g).sum().backward();
    (y_apart * g).sum().backward();
  }
  CHECK(handed == 0);
  CHECK(torch::allclose(x_flat.grad(), x_apart.grad(), 1e-5, 1e-6));
  for (std::size_t e = 0; e < flat.experts.size(); ++e) {
    INFO("expert " << e);
    const auto& f = flat.experts[e];
    const auto& a = apart.experts[e];
    CHECK(torch::allclose(f->gate_proj->weight.grad(), a->gate_proj->weight.grad(), 1e-5, 1e-6));
    CHECK(torch::allclose(f->up_proj->weight.grad(), a->up_proj->weight.grad(), 1e-5, 1e-6));
    CHECK(torch::allclose(f->down_proj->weight.grad(), a->down_proj->weight.grad(), 1e-5, 1e-6));
  }
}

// A dense layer's unit lays its parameters as the modules register them: q, k and v
// projections one after another, and the MLP's gate and up (ops::joined_linear).
TEST_CASE("a layer's unit runs q, k and v, and gate and up, each as one product, as apart gives",
          "[sharding]") {
  const auto c = muster::test::tiny_config(/*moe=*/false);
  model::transformer flat(c), apart(c);
  model::init_parameters(flat, 5, 0.3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : apart.named_parameters()) p.value().copy_(flat.named_parameters()[p.key()]);
  }
  std::vector<std::pair<std::string, torch::Tensor>> layer;
  for (auto& p : flat.layers[0]->named_parameters()) layer.emplace_back(p.key(), p.value());
  parallel::unit_options options;
  options.name = "layers.0";
  parallel::flat_unit unit(options, std::move(layer));
  const auto joined = [](model::transformer& m) {
    const auto& l = *m.layers[0];
    return std::vector<torch::Tensor>{l.self_attn->q_proj->weight, l.self_attn->k_proj->weight,
                                      l.self_attn->v_proj->weight, l.mlp->gate_proj->weight,
                                      l.mlp->up_proj->weight};
  };
  int handed = 0;  // gradients autograd handed to them (none: added in place)
  for (auto& w : joined(flat)) muster::test::count_handed(w, handed);
  torch::manual_seed(4);
  const auto tokens = torch::randint(0, c.vocab_size, {2, 9});
  const auto positions = torch::arange(9).unsqueeze(0).repeat({2, 1});
  const auto segments = torch::zeros({2, 9}, torch::kInt64);
  // the linear nodes in a graph: q, k and v as one, gate and up as one, in the unit's layer
  const auto linear_nodes = [](const torch::Tensor& y) {
    std::set<torch::autograd::Node*> seen;
    std::vector<torch::autograd::Node*> todo{y.grad_fn().get()};
    int linears = 0;
    while (!todo.empty()) {
      auto* node = todo.back();
      todo.pop_back();
      if (!node || !seen.insert(node).second) continue;
      linears += node->name().find("linear_function") != std::string::npos;
      for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
    }
    return linears;
  };
  for (int pass = 0; pass < 2; ++pass) {
    const auto y_flat = flat.forward(tokens, positions, segments).logits;
    const auto y_apart = apart.forward(tokens, positions, segments).logits;
    CHECK(relative_error(y_flat, y_apart) < 1e-5);
    CHECK(linear_nodes(y_flat) == linear_nodes(y_apart) - 3);
    const auto g = torch::randn_like(y_flat);
    (y_flat * g).sum().backward();
    (y_apart * g).sum().backward();
  }
  CHECK(handed == 0);
  for (auto& p : apart.named_parameters()) {
    INFO(p.key());
    const auto& mine = flat.named_parameters()[p.key()].grad();
    REQUIRE(mine.defined());
    CHECK(relative_error(mine, p.value().grad()) < 1e-5);
  }
}

// joined_linear (engine/ops/linear_op.hpp): layers whose weights lie one after another in one
// storage (the q, k and v projections, a SwiGLU's gate and up, in their FSDP unit) run as one
// product, with each layer's linear's values and gradients; their gradients are added where they
// lie when they lie so, else handed to autograd; anything else is left to each layer's linear.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/ops/autocast_query.hpp"
#include "engine/ops/linear_op.hpp"
#include "tests/engine/count_handed.hpp"

using muster::engine::ops::joined_linear;
using muster::engine::ops::set_autocast;

namespace {

constexpr std::int64_t kIn = 40;
const std::vector<std::int64_t> kOuts = {48, 16, 16};  // q, and k and v of fewer heads

struct laid_out {
  std::vector<torch::nn::Linear> layers;  // their weights views of `params`, one after another
  std::vector<torch::Tensor> apart;       // the same weights as separate leaves
  torch::Tensor params, grads;            // grads: undefined, or the gradients' buffer
  int handed = 0;                         // gradients autograd handed the layers' weights
};

enum class grads_at {
  none,    // no gradients yet
  buffer,  // each weight's gradient a view of one buffer, as an FSDP unit sets them
  apart,   // each weight's gradient a tensor of its own
};

laid_out lay_out(grads_at where) {
  const bool with_grads = where != grads_at::none;
  laid_out l;
  std::int64_t total = 0;
  for (auto out : kOuts) total += out * kIn;
  l.params = torch::randn({total}) * 0.2;
  if (with_grads) l.grads = torch::randn({total});  // gradients already summed there
  std::int64_t at = 0;
  for (auto out : kOuts) {
    torch::nn::Linear layer(torch::nn::LinearOptions(kIn, out).bias(false));
    layer->weight.set_data(l.params.narrow(0, at, out * kIn).view({out, kIn}));
    if (with_grads) {
      const auto grad = l.grads.narrow(0, at, out * kIn).view({out, kIn});
      layer->weight.mutable_grad() = where == grads_at::apart ? grad.clone() : grad;
    }
    muster::test::count_handed(layer->weight, l.handed);
    auto w = layer->weight.detach().clone().requires_grad_(true);
    if (with_grads) w.mutable_grad() = layer->weight.grad().clone();
    l.apart.push_back(w);
    l.layers.push_back(layer);
    at += out * kIn;
  }
  return l;
}

// Two forward and backward passes through joined_linear and through each weight's linear (the
// gradients accumulate): the same values and gradients.
void check_two_passes(laid_out& l, const torch::Tensor& x0) {
  auto x = x0.clone().requires_grad_(true), x_apart = x0.clone().requires_grad_(true);
  for (int pass = 0; pass < 2; ++pass) {
    INFO("pass " << pass);
    const auto y = joined_linear(x, l.layers);
    REQUIRE(y.defined());
    std::vector<torch::Tensor> parts;
    for (const auto& w : l.apart) parts.push_back(torch::linear(x_apart, w));
    const auto want = torch::cat(parts, -1);
    REQUIRE(y.sizes() == want.sizes());
    CHECK(torch::allclose(y, want, 1e-5, 1e-6));
    const auto g = torch::randn_like(y);
    (y * g).sum().backward();
    (want * g).sum().backward();
  }
  CHECK(torch::allclose(x.grad(), x_apart.grad(), 1e-5, 1e-5));
  for (std::size_t i = 0; i < l.layers.size(); ++i) {
    INFO("layer " << i);
    REQUIRE(l.layers[i]->weight.grad().defined());
    CHECK(torch::allclose(l.layers[i]->weight.grad(), l.apart[i].grad(), 1e-5, 1e-5));
  }
}

}  // namespace

TEST_CASE("joined_linear runs layers laid one after another as one product, gradients in place",
          "[linear_op]") {
  torch::manual_seed(11);
  auto l = lay_out(grads_at::buffer);
  check_two_passes(l, torch::randn({3, 7, kIn}));
  CHECK(l.handed == 0);  // added to the buffer, none through autograd
  CHECK(l.layers[0]->weight.grad().data_ptr() == l.grads.data_ptr());  // still the buffer's
}

TEST_CASE("joined_linear hands the gradients back where they do not lie as the weights do",
          "[linear_op]") {
  torch::manual_seed(12);
  SECTION("gradients of their own") {
    auto l = lay_out(grads_at::apart);
    check_two_passes(l, torch::randn({5, kIn}));
    CHECK(l.handed == 6);
  }
  SECTION("no gradients yet") {
    auto l = lay_out(grads_at::none);
    check_two_passes(l, torch::randn({5, kIn}));
    // the first pass hands back pieces of one buffer, which autograd keeps as the gradients:
    // they lie as the weights do, so the second pass adds to them
    CHECK(l.handed == 3);
  }
}

TEST_CASE("joined_linear over no rows gives no rows and adds nothing", "[linear_op]") {
  torch::manual_seed(13);
  auto l = lay_out(grads_at::buffer);
  const auto before = l.grads.clone();
  auto x = torch::randn({0, kIn}).requires_grad_(true);
  const auto y = joined_linear(x, l.layers);
  REQUIRE(y.defined());
  CHECK(y.sizes() == std::vector<std::int64_t>{0, 80});
  y.sum().backward();
  CHECK(l.grads.equal(before));
  CHECK(x.grad().sizes() == x.sizes());
}

TEST_CASE("joined_linear leaves layers apart, with a bias or under CPU autocast to each linear",
          "[linear_op]") {
  torch::manual_seed(14);
  const auto x = torch::randn({4, kIn});
  // separate modules: their weights in storages of their own
  std::vector<torch::nn::Linear> apart;
  for (auto out : kOuts) apart.emplace_back(torch::nn::LinearOptions(kIn, out).bias(false));
  CHECK_FALSE(joined_linear(x, apart).defined());
  auto l = lay_out(grads_at::none);
  CHECK(joined_linear(x, l.layers).defined());
  // one after another, but in the wrong order
  CHECK_FALSE(joined_linear(x, {l.layers[1], l.layers[0], l.layers[2]}).defined());
  // a bias
  l.layers[1]->bias = torch::zeros({kOuts[1]});
  CHECK_FALSE(joined_linear(x, l.layers).defined());
  l.layers[1]->bias = torch::Tensor();
  // x of another width
  CHECK_FALSE(joined_linear(torch::randn({4, kIn + 1}), l.layers).defined());
  {
    set_autocast(at::kCPU, true, torch::kBFloat16);
    const bool taken = joined_linear(x, l.layers).defined();
    set_autocast(at::kCPU, false, torch::kBFloat16);
    CHECK_FALSE(taken);
  }
}

TEST_CASE("joined_linear under torch::autograd::grad leaves the gradients' buffer alone",
          "[linear_op]") {
  torch::manual_seed(15);
  auto l = lay_out(grads_at::buffer);
  const auto before = l.grads.clone();
  const auto x = torch::randn({6, kIn});
  const auto y = joined_linear(x, l.layers);
  REQUIRE(y.defined());
  // the gradient of q's weight alone, captured: not added to any .grad
  const auto got = torch::autograd::grad({y.sum()}, {l.layers[0]->weight})[0];
  const auto want = torch::autograd::grad({torch::linear(x, l.apart[0]).sum()}, {l.apart[0]})[0];
  CHECK(torch::allclose(got, want, 1e-5, 1e-6));
  CHECK(l.grads.equal(before));
}

TEST_CASE("joined_linear's gradients have a graph under create_graph, as linear's do",
          "[linear_op]") {
  torch::manual_seed(16);
  auto l = lay_out(grads_at::none);
  const auto x0 = torch::randn({4, kIn});
  // d/dx of |dy/dW . dW-direction|^2 needs the graph of the weights' gradient, which has x
  const auto second_order = [&](const torch::Tensor& y, const std::vector<torch::Tensor>& ws,
                                const torch::Tensor& x) {
    const auto g = torch::autograd::grad({y.pow(2).sum()}, ws, {}, /*retain_graph=*/true,
                                         /*create_graph=*/true);
    torch::Tensor penalty = torch::zeros({});
    for (const auto& gi : g) penalty = penalty + gi.pow(2).sum();
    return torch::autograd::grad({penalty}, {x})[0];
  };
  auto x = x0.clone().requires_grad_(true), x_apart = x0.clone().requires_grad_(true);
  std::vector<torch::Tensor> ws, parts;
  for (const auto& layer : l.layers) ws.push_back(layer->weight);
  for (const auto& w : l.apart) parts.push_back(torch::linear(x_apart, w));
  const auto got = second_order(joined_linear(x, l.layers), ws, x);
  const auto want = second_order(torch::cat(parts, -1), l.apart, x_apart);
  CHECK(torch::allclose(got, want, 1e-4, 1e-5));
}

// The engine's transformer on the CPU: RMSNorm and rotary positions by their definitions,
// attention that never looks ahead or across documents (so a packed document computes exactly
// what it computes alone), layout-independent initialisation, the config the engine builds
// from a job file, and a model that learns.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include <cmath>

#include "common/error.hpp"
#include "engine/model/decoder.hpp"
#include "engine/model/init.hpp"
#include "engine/ops/causal_attention_op.hpp"
#include "engine/ops/linear_op.hpp"
#include "engine/ops/rms_norm_op.hpp"
#include "engine/ops/swiglu_op.hpp"
#include "tests/engine/model_fixtures.hpp"
#include "tests/engine/relative_error.hpp"

using namespace muster::engine::model;
using muster::test::relative_error;
using muster::test::tiny_config;

namespace {

torch::Tensor row(std::vector<std::int64_t> v) { return torch::tensor(v).unsqueeze(0); }

}  // namespace

TEST_CASE("RMSNorm scales each vector to unit root-mean-square, times its weight", "[model]") {
  rms_norm norm(4, 1e-6);
  torch::NoGradGuard no_grad;
  norm.weight.copy_(torch::tensor({1.0f, 2.0f, 1.0f, 1.0f}));
  auto y = norm.forward(torch::tensor({{2.0f, 2.0f, 2.0f, 2.0f}}));
  CHECK(torch::allclose(y, torch::tensor({{1.0f, 2.0f, 1.0f, 1.0f}}), 1e-5, 1e-5));
}

TEST_CASE("rotary positions: a query-key product depends only on their distance", "[model]") {
  torch::manual_seed(1);
  auto q = torch::randn({1, 1, 1, 8}, torch::kFloat64), k = torch::randn({1, 1, 1, 8}, torch::kFloat64);
  auto dot = [&](std::int64_t pq, std::int64_t pk) {
    auto rq = make_rotary(row({pq}), 8, 10000.0, torch::kFloat64);
    auto rk = make_rotary(row({pk}), 8, 10000.0, torch::kFloat64);
    return (apply_rotary(q, rq) * apply_rotary(k, rk)).sum().item<double>();
  };
  CHECK(dot(7, 3) == Approx(dot(104, 100)).epsilon(1e-12));
  CHECK(dot(7, 3) != Approx(dot(7, 4)).epsilon(1e-6));
  CHECK(dot(0, 0) == Approx((q * k).sum().item<double>()));  // position 0 is no rotation
}

TEST_CASE("rotary positions: values and gradients equal Hugging Face's rotate_half formula",
          "[model]") {
  torch::manual_seed(2);
  auto x = torch::randn({2, 3, 5, 8}, torch::kFloat64).requires_grad_(true);
  const auto rope = make_rotary(torch::arange(5).repeat({2, 1}) * 3, 8, 10000.0, torch::kFloat64);
  auto y = apply_rotary(x, rope);
  auto grad_out = torch::randn_like(y);
  auto dx = torch::autograd::grad({y}, {x}, {grad_out})[0];
  auto x2 = x.detach().requires_grad_(true);
  auto rotated = torch::cat({-x2.narrow(-1, 4, 4), x2.narrow(-1, 0, 4)}, -1);
  auto ref = x2 * rope.cos.unsqueeze(1) + rotated * rope.sin.unsqueeze(1);
  auto dx2 = torch::autograd::grad({ref}, {x2}, {grad_out})[0];
  CHECK(torch::allclose(y, ref, 1e-12, 1e-14));
  CHECK(torch::allclose(dx, dx2, 1e-12, 1e-14));
}

TEST_CASE("SwiGLU through the fused kernel: values and gradients equal silu(gate) * up, in fp32 "
          "and bf16",
          "[model]") {
  torch::manual_seed(6);
  auto gate = (torch::randn({37, 19}) * 4).requires_grad_(true);
  auto up = torch::randn({37, 19}).requires_grad_(true);
  auto y = muster::engine::ops::swiglu(gate, up);
  auto grad_out = torch::randn_like(y);
  auto grads = torch::autograd::grad({y}, {gate, up}, {grad_out});
  auto gate2 = gate.detach().to(torch::kFloat64).requires_grad_(true);
  auto up2 = up.detach().to(torch::kFloat64).requires_grad_(true);
  auto ref = torch::silu(gate2) * up2;
  auto ref_grads = torch::autograd::grad({ref}, {gate2, up2}, {grad_out.to(torch::kFloat64)});
  CHECK(torch::allclose(y.to(torch::kFloat64), ref, 1e-5, 1e-6));
  CHECK(torch::allclose(grads[0].to(torch::kFloat64), ref_grads[0], 1e-5, 1e-6));
  CHECK(torch::allclose(grads[1].to(torch::kFloat64), ref_grads[1], 1e-5, 1e-6));
  CHECK_THAT(y.grad_fn()->name(), Catch::Contains("swiglu_function"));
  // bf16 takes the kernel too: fp32 arithmetic rounded once, so within a bf16 rounding (2^-8
  // relative) of fp64 on the same bf16 inputs, gradients too
  auto gate16 = gate.detach().to(torch::kBFloat16).requires_grad_(true);
  auto up16 = up.detach().to(torch::kBFloat16).requires_grad_(true);
  auto half = muster::engine::ops::swiglu(gate16, up16);
  CHECK(half.scalar_type() == torch::kBFloat16);
  CHECK_THAT(half.grad_fn()->name(), Catch::Contains("swiglu_function"));
  auto grads16 = torch::autograd::grad({half}, {gate16, up16}, {grad_out.to(torch::kBFloat16)});
  auto gate64 = gate16.detach().to(torch::kFloat64).requires_grad_(true);
  auto up64 = up16.detach().to(torch::kFloat64).requires_grad_(true);
  auto ref64 = torch::silu(gate64) * up64;
  auto ref64_grads = torch::autograd::grad(
      {ref64}, {gate64, up64}, {grad_out.to(torch::kBFloat16).to(torch::kFloat64)});
  const double rounding = 1.0 / 256;
  CHECK(torch::allclose(half.to(torch::kFloat64), ref64, rounding, 1e-30));
  CHECK(torch::allclose(grads16[1].to(torch::kFloat64), ref64_grads[1], rounding, 1e-30));
  // silu's derivative cancels near gate = -1.28: bounded by its terms' size there
  CHECK(torch::allclose(grads16[0].to(torch::kFloat64), ref64_grads[0], rounding, 1e-3));
  // another dtype (fp64) takes torch's ops
  CHECK_THAT(muster::engine::ops::swiglu(gate2, up2).grad_fn()->name(),
             !Catch::Contains("swiglu_function"));
}

TEST_CASE("SwiGLU over packed rows (gate | up) is SwiGLU of the halves, the gradient packed the "
          "same way",
          "[model]") {
  torch::manual_seed(16);
  const auto packed = (torch::randn({3, 11, 2 * 13}) * 3);
  const auto grad_out = torch::randn({3, 11, 13});
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat64}) {
    INFO(c10::toString(dtype));
    auto gate_up = packed.to(dtype).requires_grad_(true);
    auto y = muster::engine::ops::swiglu_rows(gate_up);
    REQUIRE(y.sizes() == torch::IntArrayRef({3, 11, 13}));
    CHECK(y.scalar_type() == dtype);
    const auto g = grad_out.to(dtype);
    const auto grad = torch::autograd::grad({y}, {gate_up}, {g})[0];
    // the same values through the two-tensor op (the kernel where it takes them)
    auto parts = gate_up.detach().chunk(2, -1);
    auto gate = parts[0].contiguous().requires_grad_(true);
    auto up = parts[1].contiguous().requires_grad_(true);
    auto want = muster::engine::ops::swiglu(gate, up);
    const auto want_grads = torch::autograd::grad({want}, {gate, up}, {g});
    const auto packed_grads = torch::cat({want_grads[0], want_grads[1]}, -1);
    if (dtype != torch::kFloat64) {  // the same kernel functions: the same bits
      CHECK(torch::equal(y, want));
      CHECK(torch::equal(grad, packed_grads));
      CHECK_THAT(y.grad_fn()->name(), Catch::Contains("swiglu_rows_function"));
    } else {  // torch's silu over strided halves (it vectorizes contiguous ones otherwise)
      CHECK(torch::allclose(y, want, 1e-12, 1e-12));
      CHECK(torch::allclose(grad, packed_grads, 1e-12, 1e-12));
    }
  }
}

TEST_CASE("linear through the kernels' gemm: values and gradients equal x W^T over two uses, "
          "with bias and in bf16 through torch's linear", "[model]") {
  torch::manual_seed(7);
  auto x = torch::randn({3, 29, 40}).requires_grad_(true);  // (..., in) rows
  auto w = torch::randn({17, 40}).requires_grad_(true);
  auto y = muster::engine::ops::linear(x, w);
  auto y2 = muster::engine::ops::linear(x.narrow(1, 0, 5), w);  // a second use of w
  auto g = torch::randn_like(y), g2 = torch::randn_like(y2);
  auto grads = torch::autograd::grad({y, y2}, {x, w}, {g, g2});
  auto x64 = x.detach().to(torch::kFloat64).requires_grad_(true);
  auto w64 = w.detach().to(torch::kFloat64).requires_grad_(true);
  auto ref = torch::matmul(x64, w64.t());
  auto ref2 = torch::matmul(x64.narrow(1, 0, 5), w64.t());
  auto ref_grads = torch::autograd::grad({ref, ref2}, {x64, w64},
                                         {g.to(torch::kFloat64), g2.to(torch::kFloat64)});
  CHECK(y.sizes() == torch::IntArrayRef({3, 29, 17}));
  CHECK(torch::allclose(y.to(torch::kFloat64), ref, 1e-5, 1e-5));
  CHECK(torch::allclose(grads[0].to(torch::kFloat64), ref_grads[0], 1e-5, 1e-5));
  CHECK(torch::allclose(grads[1].to(torch::kFloat64), ref_grads[1], 1e-5, 1e-4));
  // no rows (an expert that got no tokens): an empty output and a zero weight gradient
  auto none = torch::zeros({0, 40}).requires_grad_(true);
  auto empty = muster::engine::ops::linear(none, w);
  CHECK(empty.sizes() == torch::IntArrayRef({0, 17}));
  auto empty_grads = torch::autograd::grad({empty.sum()}, {w});
  CHECK(torch::equal(empty_grads[0], torch::zeros_like(w)));
  // with a bias, and in bf16: torch's linear
  auto b = torch::randn({17});
  CHECK(torch::allclose(muster::engine::ops::linear(x, w, b), torch::nn::functional::linear(x, w, b)));
  auto half = muster::engine::ops::linear(x.detach().to(torch::kBFloat16), w.detach().to(torch::kBFloat16));
  CHECK(half.scalar_type() == torch::kBFloat16);
}

TEST_CASE(
    "RMSNorm through the kernel: values and gradients equal torch's formula, bf16 rows "
    "too",
    "[model]") {
  torch::manual_seed(8);
  auto x = torch::randn({3, 300, 40}).requires_grad_(true);  // two row blocks of the backward
  auto w = torch::randn({40}).requires_grad_(true);
  auto y = muster::engine::ops::rms_norm(x, w, 1e-6);
  auto grad_out = torch::randn_like(y);
  auto grads = torch::autograd::grad({y}, {x, w}, {grad_out});
  auto x2 = x.detach().to(torch::kFloat64).requires_grad_(true);
  auto w2 = w.detach().to(torch::kFloat64).requires_grad_(true);
  auto ref = w2 * x2 * torch::rsqrt(x2.pow(2).mean(-1, true) + 1e-6);
  auto ref_grads = torch::autograd::grad({ref}, {x2, w2}, {grad_out.to(torch::kFloat64)});
  CHECK(torch::allclose(y.to(torch::kFloat64), ref, 1e-5, 1e-5));
  CHECK(torch::allclose(grads[0].to(torch::kFloat64), ref_grads[0], 1e-4, 1e-5));
  CHECK(torch::allclose(grads[1].to(torch::kFloat64), ref_grads[1], 1e-4, 1e-4));
  // bf16 rows, fp32 weight: the kernel, its fp32 output the formula's (the normalised rows
  // rounded to bf16, then times the weight) to a bf16 step, its rows' gradient bf16
  auto xh = x.detach().to(torch::kBFloat16).requires_grad_(true);
  auto half = muster::engine::ops::rms_norm(xh, w, 1e-6);
  REQUIRE(half.grad_fn() != nullptr);
  CHECK(half.grad_fn()->name().find("rms_norm_ops_function") == std::string::npos);
  CHECK(half.grad_fn()->name().find("rms_norm_function") != std::string::npos);
  CHECK(half.scalar_type() == torch::kFloat32);
  const auto x32 = xh.detach().to(torch::kFloat32);
  const auto formula =
      w.detach() * (x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + 1e-6)).to(torch::kBFloat16);
  CHECK(torch::allclose(half, formula, 1e-2, 1e-2));
  CHECK(torch::allclose(half.to(torch::kFloat64), ref.detach(), 0.05, 0.05));
  const auto half_grads = torch::autograd::grad({half}, {xh, w}, {grad_out});
  CHECK(half_grads[0].scalar_type() == torch::kBFloat16);
  CHECK(torch::allclose(half_grads[0].to(torch::kFloat64), ref_grads[0], 0.05, 0.05));
  // the weight's: g times the formula's rows rounded to bf16, summed over the 900 rows
  const auto want_w =
      (grad_out.to(torch::kFloat64) * (x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + 1e-6))
                                          .to(torch::kBFloat16)
                                          .to(torch::kFloat64))
          .flatten(0, 1)
          .sum(0);
  CHECK(torch::allclose(half_grads[1].to(torch::kFloat64), want_w, 1e-4, 1e-2));
}

TEST_CASE(
    "RMSNorm over torch's ops (what the kernel does not take) is one node with the "
    "formula's values and gradients",
    "[model]") {
  torch::manual_seed(9);
  const auto formula = [](const torch::Tensor& x, const torch::Tensor& w) {
    auto x32 = x.to(torch::kFloat32);
    return w * (x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + 1e-6)).to(x.scalar_type());
  };
  // fp64 (the kernel takes fp32 only): the gradient to the last bits of the formula's autograd
  auto x = torch::randn({2, 5, 24}, torch::kFloat64).requires_grad_(true);
  auto w = torch::randn({24}, torch::kFloat64).requires_grad_(true);
  auto y = muster::engine::ops::rms_norm(x, w, 1e-6);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name().find("rms_norm_ops_function") != std::string::npos);
  CHECK(y.grad_fn()->next_edges().size() == 2);  // x and w, no formula's graph under it
  auto xf = x.detach().clone().requires_grad_(true), wf = w.detach().clone().requires_grad_(true);
  auto yf = formula(xf, wf);
  // the formula computes in fp32 whatever x is; so does the op
  CHECK(torch::equal(y, yf));
  const auto g = torch::randn_like(y);
  auto grads = torch::autograd::grad({y}, {x, w}, {g});
  auto want = torch::autograd::grad({yf}, {xf, wf}, {g});
  CHECK(torch::allclose(grads[0], want[0], 1e-5, 1e-6));
  CHECK(torch::allclose(grads[1], want[1], 1e-5, 1e-6));
  // bf16 rows and weight (the kernel takes an fp32 weight only): the same bits forward; the
  // gradient in fp32 (the formula's autograd rounds dn to bf16 on the way), close to the fp64
  // gradient of the same values
  auto xb = torch::randn({300, 40}).to(torch::kBFloat16).requires_grad_(true);
  auto wb = torch::randn({40}).to(torch::kBFloat16).requires_grad_(true);
  auto yb = muster::engine::ops::rms_norm(xb, wb, 1e-6);
  REQUIRE(yb.grad_fn() != nullptr);
  CHECK(yb.grad_fn()->name().find("rms_norm_ops_function") != std::string::npos);
  CHECK(yb.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(yb, formula(xb.detach(), wb.detach())));
  const auto gb = torch::randn_like(yb);
  auto gradsb = torch::autograd::grad({yb}, {xb, wb}, {gb});
  CHECK(gradsb[0].scalar_type() == torch::kBFloat16);
  auto x64 = xb.detach().to(torch::kFloat64).requires_grad_(true);
  auto w64 = wb.detach().to(torch::kFloat64).requires_grad_(true);
  auto y64 = w64 * x64 * torch::rsqrt(x64.pow(2).mean(-1, true) + 1e-6);
  auto want64 = torch::autograd::grad({y64}, {x64, w64}, {gb.to(torch::kFloat64)});
  CHECK(torch::allclose(gradsb[0].to(torch::kFloat64), want64[0], 0.02, 0.02));
  CHECK(torch::allclose(gradsb[1].to(torch::kFloat64), want64[1], 0.02, 0.05));
}

TEST_CASE("the attention mask is causal and stays inside each document", "[model]") {
  auto mask = attention_mask(row({0, 0, 1, 1}))[0][0];
  auto expected = torch::tensor({{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 1}}).to(torch::kBool);
  CHECK(torch::equal(mask, expected));
}

TEST_CASE("a packed document computes exactly what it computes alone", "[model]") {
  auto c = tiny_config();
  c.capacity_factor = 0;  // dropless: routing of one token never depends on the others
  transformer model(c);
  init_parameters(model, 7);
  model.to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  auto alone = model.forward(row({5, 9, 2}), row({0, 1, 2}), row({0, 0, 0})).logits;
  // the same document packed after another one, positions restarting at 0
  auto packed = model.forward(row({3, 3, 1, 5, 9, 2}), row({0, 1, 2, 0, 1, 2}),
                              row({0, 0, 0, 1, 1, 1}))
                    .logits;
  CHECK(torch::allclose(packed.narrow(1, 3, 3), alone, 1e-12, 1e-12));
  // and a later token never changes an earlier logit
  auto changed = model.forward(row({5, 9, 7}), row({0, 1, 2}), row({0, 0, 0})).logits;
  CHECK(torch::equal(changed.narrow(1, 0, 2), alone.narrow(1, 0, 2)));
  CHECK_FALSE(torch::allclose(changed.narrow(1, 2, 1), alone.narrow(1, 2, 1)));
}

TEST_CASE("parameters carry Hugging Face's names", "[model]") {
  auto c = tiny_config();
  c.shared_ffn_hidden_size = 8;
  c.shared_expert_gate = true;
  transformer model(c);
  std::set<std::string> names;
  for (const auto& p : model.named_parameters()) names.insert(p.key());
  for (const char* name :
       {"embed_tokens.weight", "layers.0.input_layernorm.weight",
        "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_norm.weight",
        "layers.0.post_attention_layernorm.weight", "layers.0.mlp.gate_proj.weight",
        "layers.1.mlp.gate.weight", "layers.1.mlp.experts.3.down_proj.weight",
        "layers.1.mlp.shared_expert.up_proj.weight", "layers.1.mlp.shared_expert_gate.weight",
        "norm.weight", "lm_head.weight"})
    CHECK(names.count(name) == 1);
  CHECK(names.size() == 11 + 25 + 3);  // dense layer 0, MoE layer 1, embedding + norm + head
}

TEST_CASE("initial values depend on the seed and the parameter's name only", "[model]") {
  auto c = tiny_config();
  transformer a(c), b(c);
  init_parameters(a, 42);
  init_parameters(b, 42);
  for (std::size_t i = 0; i < a.parameters().size(); ++i)
    CHECK(torch::equal(a.parameters()[i], b.parameters()[i]));
  auto q = a.layers[0]->self_attn->q_proj->weight;
  CHECK(q.std().item<double>() == Approx(0.02).epsilon(0.2));
  CHECK(torch::equal(a.norm->weight, torch::ones({16})));
  // two layers' same-shaped weights differ; another seed differs
  CHECK_FALSE(torch::equal(q, a.layers[1]->self_attn->q_proj->weight));
  init_parameters(b, 43);
  CHECK_FALSE(torch::equal(q, b.layers[0]->self_attn->q_proj->weight));
  CHECK(parameter_seed(1, "x") != parameter_seed(2, "x"));
}

TEST_CASE("the engine's config follows the planner's MoE layers and refuses MLA", "[model]") {
  muster::model_section m;
  m.num_layers = 6;
  m.moe_first_dense_layers = 1;
  m.moe_layer_freq = 2;
  auto c = make_model_config(m);
  CHECK(c.moe_layers == std::vector<bool>{false, true, false, true, false, true});
  CHECK(c.head_dim == 32);
  m.kv_lora_rank = 512;
  CHECK_THROWS_WITH(make_model_config(m), Catch::Contains("model.kv_lora_rank = 512"));
}

TEST_CASE("train.expert_gemm names the grouped GEMM's method", "[model]") {
  using method = muster::kernels::cuda::grouped_gemm_method;
  CHECK(expert_gemm_method("auto") == method::automatic);
  CHECK(expert_gemm_method("grouped") == method::grouped_batched);
  CHECK(expert_gemm_method("per_expert") == method::per_group);
  CHECK(expert_gemm_method("split") == method::split_batched);
  CHECK(expert_gemm_method("sm90") == method::sm90);
  CHECK_THROWS(expert_gemm_method("fast"));  // validate() refuses it first
}

TEST_CASE("a tiny MoE model learns a repeating sequence", "[model]") {
  auto c = tiny_config();
  transformer model(c);
  init_parameters(model, 3);
  torch::optim::AdamW opt(model.parameters(), torch::optim::AdamWOptions(1e-2));
  auto tokens = row({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  auto labels = torch::roll(tokens, -1, 1);
  labels.index_put_({0, 11}, -100);
  auto positions = torch::arange(12).unsqueeze(0), segments = torch::zeros({1, 12}, torch::kInt64);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    auto out = model.forward(tokens, positions, segments);
    auto loss = token_loss_sum(out.logits, labels) / 11 + out.losses.aux + out.losses.z;
    opt.zero_grad();
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(first > 3.0);  // about log(32) at the start
  CHECK(last < 0.2);
}

namespace {

// Blocked attention (in `dtype`: fp64 takes torch's ops, fp32 on the CPU the kernel) against
// every head scoring the whole row in fp64, repeat_kv as Hugging Face writes it: the outputs
// and the input's gradient agree within rtol/atol.
void check_blocked_attention(torch::Dtype dtype, double rtol, double atol) {
  auto c = tiny_config();  // 4 heads over 2 kv heads
  attention attn(c);
  init_parameters(attn, 5, 0.2);
  attn.to(dtype);
  const std::int64_t seq = 200;  // blocks of 64, 64, 64 and 8 rows
  auto segments = torch::cat({torch::zeros({1, 90}, torch::kInt64), torch::ones({1, 110}, torch::kInt64)}, 1)
                      .repeat({2, 1});
  auto positions = torch::cat({torch::arange(90), torch::arange(110)}).unsqueeze(0).repeat({2, 1});
  const auto rope = make_rotary(positions, c.head_dim, c.rope_theta, dtype);
  const auto mask = attention_mask(segments);
  torch::manual_seed(4);
  auto x = torch::randn({2, seq, c.hidden_size}, torch::kFloat64).to(dtype).requires_grad_(true);
  auto y = attn.forward(x, rope, mask);
  auto grad_out = torch::randn_like(y);
  auto dx = torch::autograd::grad({y}, {x}, {grad_out})[0];

  attn.to(torch::kFloat64);
  const auto rope64 = make_rotary(positions, c.head_dim, c.rope_theta, torch::kFloat64);
  auto x2 = x.detach().to(torch::kFloat64).requires_grad_(true);
  auto heads = [&](const torch::Tensor& t, std::int64_t n) {
    return t.view({2, seq, n, c.head_dim}).transpose(1, 2);
  };
  auto q = apply_rotary(attn.q_norm->forward(heads(attn.q_proj(x2), c.num_heads)), rope64);
  auto k = apply_rotary(attn.k_norm->forward(heads(attn.k_proj(x2), c.num_kv_heads)), rope64);
  auto v = heads(attn.v_proj(x2), c.num_kv_heads);
  const auto group = c.num_heads / c.num_kv_heads;
  k = k.repeat_interleave(group, 1);
  v = v.repeat_interleave(group, 1);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(c.head_dim));
  auto probs = torch::softmax(scores.masked_fill(mask.logical_not(), -INFINITY), -1);
  auto ref = attn.o_proj(torch::matmul(probs, v).transpose(1, 2).reshape({2, seq, -1}));
  auto dx2 = torch::autograd::grad({ref}, {x2}, {grad_out.to(torch::kFloat64)})[0];
  CHECK(torch::allclose(y.to(torch::kFloat64), ref, rtol, atol));
  CHECK(torch::allclose(dx.to(torch::kFloat64), dx2, rtol, atol));
}

}  // namespace

TEST_CASE("attention over long rows, scored in causal blocks, equals attention over the whole "
          "row, values and gradients", "[model]") {
  check_blocked_attention(torch::kFloat64, 1e-10, 1e-12);
}

TEST_CASE("fp32 attention on the CPU (the kernel) equals attention over the whole row in fp64",
          "[model]") {
  check_blocked_attention(torch::kFloat32, 1e-4, 1e-5);
}

TEST_CASE("the kernel's key ranges come from causal masks inside documents, and only from those",
          "[model]") {
  const auto first = muster::engine::ops::causal_key_ranges(attention_mask(row({0, 0, 1, 1, 1})));
  REQUIRE(first.has_value());
  CHECK(torch::equal(*first, torch::tensor({0, 0, 2, 2, 2}, torch::kInt64).unsqueeze(0)));
  // a document id that comes back after another: its keys are no longer one range
  CHECK_FALSE(muster::engine::ops::causal_key_ranges(attention_mask(row({0, 1, 0}))).has_value());
  // a mask that looks ahead
  CHECK_FALSE(muster::engine::ops::causal_key_ranges(torch::ones({1, 1, 3, 3}, torch::kBool)).has_value());
}

// The batch rows are independent, so a wrong split (an offset off) shows as an O(1) error. The
// bits themselves may differ: oneDNN's sgemm, under the kernel and the projections, sums in
// another order with another thread count on some CPUs (an AVX2 AMD EPYC: about 1e-7).
TEST_CASE("fp32 attention on the CPU splits its rows over threads to the same result", "[model]") {
  auto c = tiny_config();
  attention attn(c);
  init_parameters(attn, 7, 0.2);
  const std::int64_t batch = 4, seq = 150;
  const auto segments = torch::cat({torch::zeros({batch, 70}, torch::kInt64), torch::ones({batch, 80}, torch::kInt64)}, 1);
  const auto positions = torch::cat({torch::arange(70), torch::arange(80)}).unsqueeze(0).repeat({batch, 1});
  const auto rope = make_rotary(positions, c.head_dim, c.rope_theta, torch::kFloat32);
  const auto mask = attention_mask(segments);
  torch::manual_seed(3);
  const auto x = torch::randn({batch, seq, c.hidden_size});
  const auto grad_out = torch::randn({batch, seq, c.hidden_size});
  auto run = [&](int threads) {
    const int before = torch::get_num_threads();
    torch::set_num_threads(threads);
    auto xi = x.clone().requires_grad_(true);
    auto y = attn.forward(xi, rope, mask);
    auto dx = torch::autograd::grad({y}, {xi}, {grad_out})[0];
    torch::set_num_threads(before);
    return std::make_pair(y.detach(), dx);
  };
  const auto [y1, dx1] = run(1);
  for (const int threads : {2, 3, 4}) {
    INFO(threads << " threads");
    const auto [y, dx] = run(threads);
    CHECK(relative_error(y, y1) < 1e-6);
    CHECK(relative_error(dx, dx1) < 1e-6);
  }
}

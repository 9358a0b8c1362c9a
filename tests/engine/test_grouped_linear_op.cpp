// The experts' grouped linear (engine/ops/grouped_linear_op.hpp) over the grouped GEMM kernel
// against its per-expert torch path (taken by fp64): the same rows out, the same gradient to the
// rows and to every expert's weight, with experts given no rows (zero gradient) among them; and
// a non-contiguous weight taking the per-expert path; x's storage NaN past its rows, which the
// wgrad must not read; the wgrad's operands with each expert's block aligned and zero-padded.
#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "engine/model/autocast_scope.hpp"
#include "engine/ops/grouped_linear_op.hpp"
#include "engine/ops/stacked_view.hpp"
#include "engine/ops/wgrad_operands.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"
#include "tests/engine/count_handed.hpp"
#include "tests/engine/expert_layout.hpp"

namespace ops = muster::engine::ops;

TEST_CASE("grouped_linear over the kernel matches a linear per expert, with gradients",
          "[grouped_linear_op]") {
  torch::manual_seed(11);
  const std::int64_t in = 19, out = 23;
  for (const auto& rows : std::vector<std::vector<std::int64_t>>{
           {5, 0, 17, 1, 0, 40}, {0, 0, 0}, {64}, {3, 9, 0}, {13}, {3, 1}, {1, 1, 1, 1}}) {
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    INFO("rows " << total << " over " << rows.size() << " experts");
    const auto x0 = torch::randn({total, in}, torch::kFloat64);
    const auto g = torch::randn({total, out}, torch::kFloat64);
    std::vector<torch::Tensor> w0;
    for (std::size_t e = 0; e < rows.size(); ++e)
      w0.push_back(torch::randn({out, in}, torch::kFloat64));
    auto run = [&](torch::Dtype dtype) {
      // x's storage goes on past its rows with NaN: the wgrad reads no row of it past x's end
      auto storage = torch::full({total + 8, in}, std::nan(""), torch::dtype(dtype));
      storage.narrow(0, 0, total).copy_(x0);
      auto x = storage.narrow(0, 0, total).detach().requires_grad_(true);
      std::vector<torch::Tensor> w;
      for (const auto& t : w0) w.push_back(t.to(dtype).requires_grad_(true));
      auto y = ops::grouped_linear(x, rows, w);
      (y * g.to(dtype)).sum().backward();
      std::vector<torch::Tensor> gw;
      for (const auto& t : w)  // the per-expert path leaves an expert without rows ungraded
        gw.push_back(t.grad().defined() ? t.grad().to(torch::kFloat64)
                                        : torch::zeros_like(t, torch::kFloat64));
      return std::tuple{y.detach().to(torch::kFloat64), x.grad().to(torch::kFloat64), gw};
    };
    const auto [y32, gx32, gw32] = run(torch::kFloat32);  // the kernel
    const auto [y64, gx64, gw64] = run(torch::kFloat64);  // a linear per expert
    REQUIRE(y32.sizes() == y64.sizes());
    CHECK(torch::allclose(y32, y64, 1e-5, 1e-4));
    CHECK(torch::allclose(gx32, gx64, 1e-5, 1e-4));
    for (std::size_t e = 0; e < rows.size(); ++e) {
      INFO("expert " << e << " with " << rows[e] << " rows");
      CHECK(torch::allclose(gw32[e], gw64[e], 1e-5, 1e-4));
      if (rows[e] == 0) CHECK(gw32[e].abs().max().item<double>() == 0.0);
    }
  }
}

TEST_CASE("grouped_linear takes a linear per expert for weights the kernel does not take",
          "[grouped_linear_op]") {
  torch::manual_seed(12);
  const std::vector<std::int64_t> rows{3, 4};
  const auto x = torch::randn({7, 5});
  const auto w0 = torch::randn({6, 5}), w1 = torch::randn({5, 6}).t();  // w1 not contiguous
  const auto y = ops::grouped_linear(x, rows, {w0, w1});
  CHECK(torch::allclose(y.narrow(0, 0, 3), torch::linear(x.narrow(0, 0, 3), w0), 1e-5, 1e-5));
  CHECK(torch::allclose(y.narrow(0, 3, 4), torch::linear(x.narrow(0, 3, 4), w1), 1e-5, 1e-5));
}

TEST_CASE("grouped_linear under CPU autocast runs in its dtype, as a linear does",
          "[grouped_linear_op]") {
  torch::manual_seed(13);
  const std::vector<std::int64_t> rows{2, 0, 5};
  const auto x = torch::randn({7, 8}, torch::requires_grad());
  std::vector<torch::Tensor> w;
  for (int e = 0; e < 3; ++e) w.push_back(torch::randn({4, 8}, torch::requires_grad()));
  muster::engine::model::autocast_scope bf16(muster::engine::model::autocast_state::bf16(true));
  const auto y = ops::grouped_linear(x, rows, w);
  CHECK(y.scalar_type() == torch::kBFloat16);
  CHECK(y.scalar_type() == torch::linear(x.narrow(0, 0, 2), w[0]).scalar_type());
  const auto want =
      torch::cat({torch::linear(x.narrow(0, 0, 2), w[0]), torch::linear(x.narrow(0, 2, 5), w[2])});
  CHECK(torch::allclose(y.to(torch::kFloat32), want.to(torch::kFloat32), 1e-2, 1e-2));
  y.sum().backward();  // the fp32 weights get their gradient through the cast
  CHECK(w[0].grad().scalar_type() == torch::kFloat32);
}

TEST_CASE("stacked_view sees equal tensors at one stride of one storage as one",
          "[grouped_linear_op]") {
  const auto flat = torch::arange(60, torch::kFloat32);
  // three (2, 3) matrices 20 elements apart, as one projection of three experts in a unit
  std::vector<torch::Tensor> ws;
  for (int e = 0; e < 3; ++e) ws.push_back(flat.narrow(0, 5 + 20 * e, 6).view({2, 3}));
  const auto all = ops::stacked_view(ws);
  REQUIRE(all.defined());
  CHECK(all.sizes() == torch::IntArrayRef({3, 2, 3}));
  for (int e = 0; e < 3; ++e) CHECK(torch::equal(all[e], ws[std::size_t(e)]));
  all[1].fill_(-1);  // the storage itself
  CHECK(ws[1].eq(-1).all().item<bool>());
  CHECK(ops::stacked_view({ws[0]}).defined());
  CHECK_FALSE(ops::stacked_view({ws[0], ws[2], ws[1]}).defined());   // not one stride
  CHECK_FALSE(ops::stacked_view({ws[0], ws[1].clone()}).defined());  // another storage
  CHECK_FALSE(ops::stacked_view({ws[0], flat.narrow(0, 7, 6).view({3, 2})}).defined());
  CHECK_FALSE(
      ops::stacked_view({flat.narrow(0, 0, 6).view({2, 3}), flat.narrow(0, 3, 6).view({2, 3})})
          .defined());                                               // overlapping
  CHECK_FALSE(ops::stacked_view({ws[0].t(), ws[1].t()}).defined());  // not contiguous
}

TEST_CASE("stacked_view of pairs end to end sees every pair in one storage at one stride",
          "[grouped_linear_op]") {
  const auto flat = torch::arange(80, torch::kFloat32);
  // an expert's gate and up (2, 3) each, end to end; the experts 20 elements apart
  const auto pair = [](const torch::Tensor& storage, std::int64_t at) {
    return std::vector<torch::Tensor>{storage.narrow(0, at, 6).view({2, 3}),
                                      storage.narrow(0, at + 6, 6).view({2, 3})};
  };
  std::vector<torch::Tensor> ws;
  for (int e = 0; e < 3; ++e) {
    const auto p = pair(flat, 4 + 20 * e);
    ws.insert(ws.end(), p.begin(), p.end());
  }
  const auto all = ops::stacked_view(ws, 2);
  REQUIRE(all.defined());
  CHECK(all.sizes() == torch::IntArrayRef({3, 4, 3}));
  for (int e = 0; e < 3; ++e)
    CHECK(torch::equal(all[e], torch::cat({ws[std::size_t(2 * e)], ws[std::size_t(2 * e + 1)]})));
  // a later pair at the right offset of another storage of the same size is not this one's
  const auto other = torch::arange(80, torch::kFloat32) + 100;
  auto elsewhere = ws;
  const auto moved = pair(other, 4 + 20 * 2);
  elsewhere[4] = moved[0];
  elsewhere[5] = moved[1];
  CHECK(ops::end_to_end(elsewhere, 2));  // each pair on its own is end to end
  CHECK_FALSE(ops::stacked_view(elsewhere, 2).defined());
  // nor is a later pair of another shape at the right offset
  auto reshaped = ws;
  reshaped[4] = flat.narrow(0, 44, 6).view({3, 2});
  reshaped[5] = flat.narrow(0, 50, 6).view({3, 2});
  CHECK_FALSE(ops::stacked_view(reshaped, 2).defined());
}

// As in an FSDP unit: the weights are views of one flat buffer and their gradients views of
// another, already holding an earlier micro-batch's sum. The node adds to them itself (autograd
// gets no gradient, so nothing is added twice), and the sum is what a linear per expert adds.
TEST_CASE("grouped_linear adds the wgrad to gradients already there, once", "[grouped_linear_op]") {
  torch::manual_seed(14);
  const std::int64_t in = 6, out = 5;
  const std::vector<std::int64_t> rows{4, 0, 9};
  const auto experts = std::int64_t(rows.size());
  const auto params = torch::randn({experts * 3 * out * in});  // gate, up, down a expert
  const auto earlier = torch::randn({experts * 3 * out * in});
  const auto x0 = torch::randn({13, in}), g = torch::randn({13, out});
  int handed = 0;  // gradients autograd handed to the flat weights (hooks): none, added in place
  auto run = [&](bool flat) {
    auto grads = earlier.clone();
    std::vector<torch::Tensor> w;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto at = e * 3 * out * in;  // the "gate" projection of expert e
      if (flat) {
        auto p = params.narrow(0, at, out * in).view({out, in}).detach().requires_grad_(true);
        p.mutable_grad() = grads.narrow(0, at, out * in).view({out, in});
        muster::test::count_handed(p, handed);
        w.push_back(p);
      } else {  // separate leaves of fp64, no gradient yet: the per-expert path
        w.push_back(params.narrow(0, at, out * in)
                        .view({out, in})
                        .to(torch::kFloat64)
                        .requires_grad_(true));
      }
    }
    const auto x = flat ? x0 : x0.to(torch::kFloat64);
    auto y = ops::grouped_linear(x, rows, w);
    (y * g.to(y.scalar_type())).sum().backward();
    std::vector<torch::Tensor> out_grads;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto at = e * 3 * out * in;
      const auto before = earlier.narrow(0, at, out * in).view({out, in}).to(torch::kFloat64);
      if (flat) {
        CHECK(w[std::size_t(e)].grad().data_ptr() == grads.narrow(0, at, 1).data_ptr());
        out_grads.push_back(grads.narrow(0, at, out * in).view({out, in}).to(torch::kFloat64));
      } else {
        const auto& gw = w[std::size_t(e)].grad();
        out_grads.push_back(before + (gw.defined() ? gw : torch::zeros_like(before)));
      }
    }
    return out_grads;
  };
  const auto got = run(true), want = run(false);
  CHECK(handed == 0);
  for (std::int64_t e = 0; e < experts; ++e) {
    INFO("expert " << e << " with " << rows[std::size_t(e)] << " rows");
    CHECK(torch::allclose(got[std::size_t(e)], want[std::size_t(e)], 1e-5, 1e-5));
  }
}

TEST_CASE(
    "padded_by_expert starts every expert's columns on a multiple of 8 (or of the sm90 "
    "kernel's step), zeros after them",
    "[grouped_linear_op]") {
  const std::int64_t out = 5, in = 3;
  for (const auto& counts : std::vector<std::vector<std::int64_t>>{
           {0, 3, 8, 1, 13, 0}, {8, 16, 0, 24}, {0, 0}, {7}, {16, 5, 0}, {3, 1}, {112, 83, 1}})
    // 0: each expert's own reduction; else one for every expert with rows (common_reduction's
    // multiple of 64, and one of 8 at the largest count, not a multiple of the sm90 step)
    for (const std::int64_t align : {ops::kColumnAlign, muster::kernels::kRowViewsStepK})
      for (const std::int64_t common : {std::int64_t{0}, std::int64_t{64}, std::int64_t{-8}}) {
        if (common == -8 && align != 8) continue;
        std::int64_t total = 0, padded = 0, largest = 0;
        for (auto c : counts) largest = std::max(largest, c);
        const auto k_of = [&](std::int64_t c) {
          if (common == 0 || c == 0) return (c + align - 1) / align * align;
          return common > 0 ? (largest + common - 1) / common * common : (largest + 7) / 8 * 8;
        };
        for (auto c : counts) {
          total += c;
          padded += k_of(c);
        }
        INFO(total << " rows over " << counts.size() << " experts, common " << common
                   << ", aligned to " << align);
        const auto dy = torch::arange(total * out, torch::kFloat32).reshape({total, out}) + 1;
        const auto x = -torch::arange(total * in, torch::kFloat32).reshape({total, in}) - 1;
        const auto ops_in =
            ops::padded_by_expert(dy, x, counts, common == 0 ? 0 : k_of(largest), align);
        REQUIRE(ops_in.dy_t.sizes() == torch::IntArrayRef({out, padded}));
        REQUIRE(ops_in.dy_t.is_contiguous());
        // bf16 rows are moved as they are: the same places, the same zeros
        const auto ops16 = ops::padded_by_expert(dy.to(torch::kBFloat16), x.to(torch::kBFloat16),
                                                 counts, common == 0 ? 0 : k_of(largest), align);
        CHECK(torch::equal(ops16.dy_t, ops_in.dy_t.to(torch::kBFloat16)));
        // x's rows left for later (sm90 reads x itself), then read as padded_by_expert reads them
        auto lazy = ops::padded_by_expert(dy, x, counts, common == 0 ? 0 : k_of(largest), align,
                                          /*with_x_rows=*/false);
        CHECK(lazy.x_rows.empty());
        CHECK_FALSE(lazy.tail.defined());
        CHECK(torch::equal(lazy.dy_t, ops_in.dy_t));
        ops::read_x_rows(lazy, x, counts);
        REQUIRE(lazy.x_rows.size() == counts.size());
        CHECK(lazy.tail.defined() == ops_in.tail.defined());
        for (std::size_t e = 0; e < counts.size(); ++e) {
          const auto k = ops_in.k[e];
          const auto rows_of = [&](const void* p) {
            return torch::from_blob(const_cast<void*>(p), {k, in}, torch::kFloat32);
          };
          if (k > 0) CHECK(torch::equal(rows_of(lazy.x_rows[e]), rows_of(ops_in.x_rows[e])));
        }
        CHECK_THROWS_WITH(ops::read_x_rows(lazy, x, counts), Catch::Contains("read already"));
        REQUIRE(ops_in.first.size() == counts.size());
        REQUIRE(ops_in.k.size() == counts.size());
        REQUIRE(ops_in.x_rows.size() == counts.size());
        std::int64_t r = 0, next = 0;
        for (std::size_t e = 0; e < counts.size(); ++e) {
          INFO("expert " << e << " with " << counts[e] << " rows");
          CHECK(ops_in.first[e] == next);  // in order, each after the last one's padded block
          CHECK(ops_in.first[e] % align == 0);
          CHECK(ops_in.k[e] == k_of(counts[e]));
          next += ops_in.k[e];
          const auto f = ops_in.first[e], c = counts[e], k = ops_in.k[e];
          CHECK(torch::equal(ops_in.dy_t.narrow(1, f, c), dy.narrow(0, r, c).t()));
          CHECK(ops_in.dy_t.narrow(1, f + c, k - c).count_nonzero().item<std::int64_t>() == 0);
          // its k rows: x's own rows and those after, zeros past x's end
          const auto* rows = static_cast<const float*>(ops_in.x_rows[e]);
          const auto read = torch::from_blob(const_cast<float*>(rows), {k, in}, torch::kFloat32);
          const auto inside = std::min(k, total - r);
          if (k > 0) {
            CHECK(torch::equal(read.narrow(0, 0, inside), x.narrow(0, r, inside)));
            CHECK(read.narrow(0, inside, k - inside).count_nonzero().item<std::int64_t>() == 0);
          }
          if (k > 0 && r + k <= total)  // where they fit, x is read where it is
            CHECK(rows == x.data_ptr<float>() + r * in);
          // the product over the padded reduction is the expert's own
          if (k > 0)
            CHECK(torch::equal(torch::mm(ops_in.dy_t.narrow(1, f, k), read),
                               torch::mm(dy.narrow(0, r, c).t(), x.narrow(0, r, c))));
          r += c;
        }
      }
}

TEST_CASE("padded_by_expert refuses an alignment off 8 and a common reduction off it",
          "[grouped_linear_op]") {
  const auto dy = torch::ones({10, 5}), x = torch::ones({10, 3});
  CHECK_THROWS_WITH(ops::padded_by_expert(dy, x, {4, 6}, 0, 12),
                    Catch::Contains("reductions aligned to 12, not a multiple of 8"));
  CHECK_THROWS_WITH(ops::padded_by_expert(dy, x, {4, 6}, 72, 64),
                    Catch::Contains("a common reduction of 72"));
  CHECK(ops::padded_by_expert(dy, x, {4, 6}, 64, 64).k == std::vector<std::int64_t>{64, 64});
}

TEST_CASE("common_reduction pads the wgrad to one reduction only where that adds little",
          "[grouped_linear_op]") {
  // the ~1B bench's 32 experts of about 1024 rows, 1024 -> 640: the largest, 1280
  std::vector<std::int64_t> even;
  for (int e = 0; e < 32; ++e) even.push_back(1024 + ((e * 37) % 9 - 4) * 64);
  CHECK(ops::common_reduction(even, 640, 1024) == 1280);
  // counts off 64 round up to it
  CHECK(ops::common_reduction({100, 65, 0, 3}, 640, 1024) == 128);
  // one expert with rows: nothing to share
  CHECK(ops::common_reduction({0, 500, 0}, 640, 1024) == 0);
  CHECK(ops::common_reduction({0, 0}, 640, 1024) == 0);
  // one expert with most rows: 31 more reductions of 32768 would be 1.3 TFLOP more
  std::vector<std::int64_t> skewed(32, 1);
  skewed[5] = 32737;
  CHECK(ops::common_reduction(skewed, 640, 1024) == 0);
  // the same counts over wide experts: 3e11 FLOP more, over the bound of 5e10
  CHECK(ops::common_reduction(even, 4096, 4096) == 0);
  // dy^T at most 3 times dy's rows, however small the products
  CHECK(ops::common_reduction({1000, 1, 1, 1}, 2, 2) == 0);
  CHECK(ops::common_reduction({1000, 900, 800, 700}, 2, 2) == 1024);
}

// An expert's gate and up projections end to end, as its FSDP unit lays them (gate, up, down
// an expert): one product with both stacked gives both projections' rows side by side, and the
// gradients of the rows and of both weights, whether added where they are (an FSDP unit's
// buffers, fp32 on the kernel) or handed back (fp32 on the kernel, fp64 a linear per expert
// over the weights joined).
TEST_CASE("grouped_linear stacks each expert's projections that lie end to end into one product",
          "[grouped_linear_op]") {
  torch::manual_seed(15);
  const std::int64_t in = 6, out = 5;
  const std::vector<std::int64_t> rows{4, 0, 9, 3};
  const auto experts = std::int64_t(rows.size());
  const muster::test::expert_layout layout{experts, out, in};
  const auto x0 = torch::randn({16, in}, torch::kFloat64), g = torch::randn({16, 2 * out});
  const auto params = torch::randn({experts * layout.step()}, torch::kFloat64);
  const auto earlier = torch::randn({experts * layout.step()}, torch::kFloat64);
  // want: each projection on its own, fp64, a linear per expert
  const auto gate64 = layout.apart(params, 0), up64 = layout.apart(params, 1);
  auto x64 = x0.clone().requires_grad_(true);
  const auto want =
      torch::cat({ops::grouped_linear(x64, rows, gate64), ops::grouped_linear(x64, rows, up64)}, 1);
  (want * g.to(torch::kFloat64)).sum().backward();
  for (const auto dtype : {torch::kFloat32, torch::kFloat64})
    for (const bool in_place : {true, false}) {
      INFO((dtype == torch::kFloat32 ? "fp32" : "fp64") << (in_place ? ", in place" : ""));
      const auto flat = params.to(dtype).clone(), grads = earlier.to(dtype).clone();
      int handed = 0;  // gradients autograd handed to the weights (hooks)
      const auto gate_up = layout.gate_up(flat, in_place ? grads : torch::Tensor(), handed);
      REQUIRE(ops::projections_end_to_end(gate_up, 2));
      auto x = x0.to(dtype).clone().requires_grad_(true);
      const auto y = ops::grouped_linear(x, rows, gate_up,
                                         muster::kernels::cuda::grouped_gemm_method::automatic, 2);
      REQUIRE(y.sizes() == torch::IntArrayRef({16, 2 * out}));
      (y * g.to(dtype)).sum().backward();
      // the kernel adds fp32 gradients where they are, else hands one to each weight
      if (dtype == torch::kFloat32) CHECK(handed == (in_place ? 0 : 2 * experts));
      CHECK(torch::allclose(y.to(torch::kFloat64), want, 1e-5, 1e-5));
      CHECK(torch::allclose(x.grad().to(torch::kFloat64), x64.grad(), 1e-5, 1e-5));
      for (std::int64_t e = 0; e < experts; ++e) {
        INFO("expert " << e << " with " << rows[std::size_t(e)] << " rows");
        const auto& wg = gate_up[std::size_t(2 * e)];
        const auto& wu = gate_up[std::size_t(2 * e + 1)];
        const auto before_g = earlier.narrow(0, layout.at(e, 0), out * in).view({out, in});
        const auto before_u = earlier.narrow(0, layout.at(e, 1), out * in).view({out, in});
        // in place: the earlier sums plus this wgrad; else autograd's (zero for no rows)
        // (a linear per expert leaves an expert without rows ungraded)
        const auto want_of = [](const torch::Tensor& w) {
          return w.grad().defined() ? w.grad().to(torch::kFloat64)
                                    : torch::zeros_like(w, torch::kFloat64);
        };
        const auto got_g = want_of(wg) - (in_place ? before_g : before_g * 0);
        const auto got_u = want_of(wu) - (in_place ? before_u : before_u * 0);
        CHECK(torch::allclose(got_g, want_of(gate64[std::size_t(e)]), 1e-5, 1e-5));
        CHECK(torch::allclose(got_u, want_of(up64[std::size_t(e)]), 1e-5, 1e-5));
      }
    }
  // the down projection after them is not end to end with the gate: no stacking
  const auto w = params.view({experts, 3, out * in});  // gate, up, down an expert
  CHECK_FALSE(ops::projections_end_to_end({w[0][0].view({out, in}), w[0][2].view({out, in})}, 2));
  CHECK(ops::projections_end_to_end({w[0][1].view({out, in}), w[0][2].view({out, in})}, 2));
}

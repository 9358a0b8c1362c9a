// The router's CUDA kernels against the CPU reference (kernels/cpu/router.cpp) on small, odd
// and large shapes, both score functions, with and without renormalisation: the experts
// exactly (but for near-ties, where the CPU scores two experts within rounding), scores, weights
// and the backward within a normalised error bound; the first mismatches are printed. Without a
// CUDA device: "SKIPPED: no CUDA device" (ctest: Skipped).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <tuple>
#include <vector>

#include "muster/kernels/router.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"
#include "tests/kernels/router_cases.hpp"

using namespace muster::kernels;
using muster::test::compare;
using muster::test::describe;
using muster::test::device_buffer;
using muster::test::have_device;
using muster::test::router_case;

namespace {

// Whether the GPU's expert `mine` for a choice the CPU gave `cpu` in the row at `row` is the
// CPU's within rounding: the GPU's __expf and the CPU's exp differ by an ulp or two, so a
// near-tie may break either way.
bool near_tie(const std::vector<float>& scores, std::size_t row, std::int64_t mine,
              std::int64_t cpu, std::int64_t experts) {
  if (mine < 0 || mine >= experts) return false;
  const float a = scores[row + std::size_t(mine)], b = scores[row + std::size_t(cpu)];
  return std::fabs(a - b) <= 4e-7f * std::fabs(b);
}

// One shape's forward and backward against the CPU's, from logits drawn with `seed`.
void check_router(const router_shape& s, std::uint32_t& seed, std::size_t offset) {
  const auto tokens = s.num_tokens, experts = s.num_experts;
  const auto topk = s.topk;
  const auto n = std::size_t(tokens * experts), nk = std::size_t(tokens * topk);
  const auto logits = muster::test::normal_draws(n, seed++);
  const auto grad_w = muster::test::normal_draws(nk, seed++);
  const auto grad_s = muster::test::normal_draws(n, seed++);
  std::vector<float> scores(n), weights(nk), grad(n), grad_both(n);
  std::vector<std::int64_t> chosen(nk);
  cpu::router_forward(logits.data(), scores.data(), chosen.data(), weights.data(), s);
  cpu::router_backward(scores.data(), chosen.data(), grad_w.data(), nullptr, grad.data(), s);
  cpu::router_backward(scores.data(), chosen.data(), grad_w.data(), grad_s.data(), grad_both.data(),
                       s);

  // every row-wide buffer `offset` floats into its allocation: 1 puts the rows off 16 bytes
  const auto shifted = [offset](const std::vector<float>& v) {
    std::vector<float> out(offset, 0.0f);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  const auto unshifted = [offset](std::vector<float> v) {
    v.erase(v.begin(), v.begin() + std::ptrdiff_t(offset));
    return v;
  };
  device_buffer<float> d_logits(shifted(logits)), d_scores(n + offset), d_weights(nk),
      d_grad_w(grad_w), d_grad_s(shifted(grad_s)), d_grad(n + offset), d_grad_both(n + offset);
  device_buffer<std::int64_t> d_chosen(nk);
  cuda::router_forward(d_logits.ptr + offset, d_scores.ptr + offset, d_chosen.ptr, d_weights.ptr, s,
                       nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // the backward from the CPU's choice, so a near-tie choosing differently cannot blur it
  device_buffer<std::int64_t> d_cpu_chosen(chosen);
  device_buffer<float> d_cpu_scores(shifted(scores));
  cuda::router_backward(d_cpu_scores.ptr + offset, d_cpu_chosen.ptr, d_grad_w.ptr, nullptr,
                        d_grad.ptr + offset, s, nullptr);
  cuda::router_backward(d_cpu_scores.ptr + offset, d_cpu_chosen.ptr, d_grad_w.ptr,
                        d_grad_s.ptr + offset, d_grad_both.ptr + offset, s, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  std::string report;
  CHECK(compare(unshifted(d_scores.host()), scores, 1e-5, report) <= 1e-5);
  INFO(report);
  // experts: exact, except where the CPU's scores of the two experts are within rounding
  // of each other (the GPU's __expf and the CPU's exp differ by an ulp or two): a near-tie
  // the two may break either way. Any other difference is a wrong choice.
  const auto got = d_chosen.host();
  std::size_t differ = 0, wrong = 0;
  std::ostringstream wrong_ones;
  for (std::size_t i = 0; i < nk; ++i) {
    if (got[i] == chosen[i]) continue;
    ++differ;
    const auto row = (i / std::size_t(topk)) * std::size_t(experts);
    if (near_tie(scores, row, got[i], chosen[i], experts)) continue;
    const bool valid = got[i] >= 0 && got[i] < experts;
    const float mine = valid ? scores[row + std::size_t(got[i])] : -1.0f;
    const float cpu = scores[row + std::size_t(chosen[i])];
    if (++wrong <= 5)
      wrong_ones << " [token " << i / std::size_t(topk) << " choice " << i % std::size_t(topk)
                 << ": GPU expert " << got[i] << " (CPU score " << mine << "), CPU expert "
                 << chosen[i] << " (score " << cpu << ")]";
  }
  // no expert twice in a token's choices (a near-tie taken twice would pass the above)
  for (std::size_t t = 0; t < std::size_t(tokens); ++t)
    for (std::size_t a = 0; a < std::size_t(topk); ++a)
      for (std::size_t b = a + 1; b < std::size_t(topk); ++b)
        if (got[t * std::size_t(topk) + a] == got[t * std::size_t(topk) + b] && ++wrong <= 5)
          wrong_ones << " [token " << t << ": expert " << got[t * std::size_t(topk) + a]
                     << " chosen twice]";
  INFO("choices that are no near-tie:" << wrong_ones.str());
  CHECK(wrong == 0);
  // the weights of the tokens whose choices agree (with renormalisation, a near-tie
  // elsewhere in a token changes all its weights)
  const auto got_weights = d_weights.host();
  std::vector<double> mine_w, cpu_w;
  for (std::size_t t = 0; t < std::size_t(tokens); ++t) {
    bool same = true;
    for (std::size_t j = 0; j < std::size_t(topk); ++j)
      same = same && got[t * std::size_t(topk) + j] == chosen[t * std::size_t(topk) + j];
    for (std::size_t j = 0; same && j < std::size_t(topk); ++j) {
      mine_w.push_back(got_weights[t * std::size_t(topk) + j]);
      cpu_w.push_back(weights[t * std::size_t(topk) + j]);
    }
  }
  CHECK(mine_w.size() + std::size_t(topk) * differ >= nk);  // most tokens compared
  CHECK(compare(mine_w, cpu_w, 1e-5, report) <= 1e-5);
  CHECK(compare(unshifted(d_grad.host()), grad, 1e-5, report) <= 1e-5);
  CHECK(compare(unshifted(d_grad_both.host()), grad_both, 1e-5, report) <= 1e-5);
}

// The forward of `logits` on the CPU and the GPU: the CPU's scores, weights and experts, and
// the GPU's experts and weights.
struct forward_pair {
  std::vector<float> scores, weights;
  std::vector<std::int64_t> chosen, got;
  std::vector<float> got_weights;
};

forward_pair forward_both(const std::vector<float>& logits, const router_shape& s) {
  const auto n = logits.size(), nk = std::size_t(s.num_tokens * s.topk);
  forward_pair f{
      std::vector<float>(n), std::vector<float>(nk), std::vector<std::int64_t>(nk), {}, {}};
  cpu::router_forward(logits.data(), f.scores.data(), f.chosen.data(), f.weights.data(), s);
  device_buffer<float> d_logits(logits), d_scores(n), d_weights(nk);
  device_buffer<std::int64_t> d_chosen(nk);
  cuda::router_forward(d_logits.ptr, d_scores.ptr, d_chosen.ptr, d_weights.ptr, s, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  f.got = d_chosen.host();
  f.got_weights = d_weights.host();
  return f;
}

using shape_list = std::vector<std::tuple<std::int64_t, std::int64_t, int>>;

// f(shape) for each of `shapes` (tokens, experts, topk) under both score functions, with
// renormalisation as each of `renormalize` says, the shape named in any failure.
template <class F>
void each_case(const shape_list& shapes, std::initializer_list<bool> renormalize, F&& f) {
  for (const auto score : {router_score::softmax, router_score::sigmoid})
    for (const bool renorm : renormalize)
      for (const auto& [tokens, experts, topk] : shapes) {
        const auto s = router_case(tokens, experts, topk, score, renorm);
        INFO(describe(s));
        f(s);
      }
}

}  // namespace

TEST_CASE("the router's CUDA kernels match the CPU reference", "[kernels][router][gpu]") {
  if (!have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 5;
  each_case(
      shape_list{{1, 1, 1},
                 {3, 7, 2},
                 // rows that fill every slot (32 x slots a lane experts, aligned): the kernels'
                 // kFull form, at each slot count; at 128 and 256 the forward stages rows
                 // through shared memory, with fewer tokens than one warp's ring holds too
                 {500, 32, 4},
                 {2000, 512, 8},
                 {5, 256, 8},
                 {3, 128, 2},
                 {33, 13, 3},
                 {50, 33, 3},
                 {1000, 64, 8},
                 {4097, 128, 8},
                 {129, 130, 6},
                 {65536, 256, 8},
                 {301, 384, 8},
                 {17, 1024, 32},
                 // more tokens than the warps a GPU holds at once, so each warp routes several,
                 // loading the next while it routes one: every slot count and row form
                 {30000, 20, 4},
                 {30000, 64, 8},
                 {30000, 100, 4},
                 {30000, 128, 4},
                 {30000, 130, 6},
                 {12000, 384, 8},  // fewer: fewer warps fit with more slots
                 {12000, 1024, 32},
                 // the general forms of slot counts whose full rows the cases above take:
                 // aligned rows that leave slots empty (8 slots: 160 experts, as DeepSeek-V2;
                 // 2 slots at 8 bytes a lane; 32 slots), and rows too odd for chunks (4, 16, 32)
                 {30000, 160, 6},
                 {200, 62, 4},
                 {12000, 1000, 8},
                 {200, 127, 4},
                 {100, 501, 8},
                 {50, 1023, 32},
                 // full rows of 1 and 16 slots, past the warps a GPU holds; the 128-expert ring
                 // (three rows a warp) wrapping on every warp
                 {30000, 32, 4},
                 {30000, 512, 8},
                 {65536, 128, 4}},
      {false, true}, [&](const router_shape& s) { check_router(s, seed, 0); });
}

// Rows the kernels cannot move 16 (or 8) bytes at a time: they move them a float at a time
// (128 experts: the general form, where aligned rows would be staged through shared memory).
TEST_CASE("the router's CUDA kernels take rows off a 16-byte boundary", "[kernels][router][gpu]") {
  if (!have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 77;
  each_case(shape_list{{100, 64, 4}, {1000, 128, 4}, {1000, 256, 8}}, {true},
            [&](const router_shape& s) { check_router(s, seed, 1); });
}

// Exact ties (tie_logits), at scores of 1 and 0 too.
TEST_CASE("the router's CUDA kernel breaks ties to the lower expert as the CPU does",
          "[kernels][router][gpu]") {
  if (!have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  each_case(shape_list{{257, 8, 8}, {300, 32, 4}, {1000, 64, 8}, {300, 256, 16}, {17, 1024, 32}},
            {false}, [](const router_shape& s) {
              const auto tokens = s.num_tokens, experts = s.num_experts;
              const auto topk = s.topk;
              const auto n = std::size_t(tokens * experts), nk = std::size_t(tokens * topk);
              const auto logits = muster::test::tie_logits(n, 17);
              const auto f = forward_both(logits, s);
              const auto& [scores, weights, chosen, got, got_weights] = f;
              std::size_t differ = 0, first = nk;
              for (std::size_t i = 0; i < nk; ++i)
                if (got[i] != chosen[i] && differ++ == 0) first = i;
              INFO("first difference at token " << first / std::size_t(topk) << ", choice "
                                                << first % std::size_t(topk));
              CHECK(differ == 0);
              std::string report;
              CHECK(compare(got_weights, weights, 1e-5, report) <= 1e-5);
              INFO(report);
            });
}

// A NaN logit: its token's experts are ids in range, each once (router.hpp), and the tokens
// without one choose as the CPU does (but for near-ties), whatever row form (full, staged,
// general) routes them.
TEST_CASE("the router's CUDA kernel keeps a NaN logit to its own token", "[kernels][router][gpu]") {
  if (!have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 91;
  each_case(shape_list{{300, 13, 3}, {3000, 128, 8}, {3000, 256, 8}, {300, 160, 6}}, {true},
            [&](const router_shape& s) {
              const auto tokens = s.num_tokens, experts = s.num_experts;
              const auto topk = s.topk;
              const auto n = std::size_t(tokens * experts);
              auto logits = muster::test::normal_draws(n, seed++);
              // every 7th token gets a NaN, at an expert that moves with the token
              std::vector<bool> poisoned(std::size_t(tokens), false);
              for (std::size_t t = 0; t < std::size_t(tokens); t += 7) {
                poisoned[t] = true;
                logits[t * std::size_t(experts) + t % std::size_t(experts)] = std::nanf("");
              }
              const auto f = forward_both(logits, s);
              const auto& [scores, weights, chosen, got, got_weights] = f;
              std::size_t out_of_range = 0, twice = 0, differ = 0;
              for (std::size_t t = 0; t < std::size_t(tokens); ++t)
                for (std::size_t a = 0; a < std::size_t(topk); ++a) {
                  const auto e = got[t * std::size_t(topk) + a];
                  if (e < 0 || e >= experts) ++out_of_range;
                  for (std::size_t b = a + 1; b < std::size_t(topk); ++b)
                    if (e == got[t * std::size_t(topk) + b]) ++twice;
                  const auto cpu_e = chosen[t * std::size_t(topk) + a];
                  if (!poisoned[t] && e != cpu_e &&
                      !near_tie(scores, t * std::size_t(experts), e, cpu_e, experts))
                    ++differ;
                }
              CHECK(out_of_range == 0);
              CHECK(twice == 0);
              CHECK(differ == 0);
            });
}

// The permutation's CUDA kernels against the CPU reference (kernels/cpu/permute.cpp): the index
// exactly (a stable counting sort on both), the gather exactly, the combine and its backward
// within a normalised bound (bf16 rows: within one bf16 ulp); dropped assignments included,
// hidden sizes that take the 16-byte path and ones that do not. Without a CUDA device:
// "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <random>
#include <tuple>
#include <vector>

#include "muster/kernels/permute.hpp"
#include "tests/kernels/bf16_values.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;
using muster::test::compare;
using muster::test::device_buffer;

TEST_CASE("the permutation's CUDA kernels match the CPU reference", "[kernels][permute][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  std::uint32_t seed = 31;
  for (const auto& [tokens, topk, experts, hidden] :
       std::vector<std::tuple<std::int64_t, int, std::int64_t, std::int64_t>>{{1, 1, 1, 1},
                                                                              {5, 2, 3, 7},
                                                                              {37, 3, 13, 33},
                                                                              {1000, 8, 64, 257},
                                                                              {16384, 8, 256, 1024},
                                                                              {3, 2, 1024, 4096}}) {
    permute_shape s;
    s.num_tokens = tokens;
    s.topk = topk;
    s.num_experts = experts;
    s.hidden = hidden;
    INFO("tokens " << tokens << " topk " << topk << " experts " << experts << " hidden " << hidden);
    const auto n = std::size_t(tokens * topk), num_experts = std::size_t(experts);
    std::mt19937 gen(seed++);
    std::vector<std::int64_t> assigned(n);
    for (auto& e : assigned) e = gen() % 10 == 0 ? -1 : std::int64_t(gen() % num_experts);
    std::vector<std::int64_t> counts(num_experts), offsets(num_experts + 1), row_of(n),
        source_of(n);
    cpu::permute_index(assigned.data(), counts.data(), offsets.data(), row_of.data(),
                       source_of.data(), s);
    const auto rows = offsets.back();

    device_buffer<std::int64_t> d_assigned(assigned), d_counts(num_experts),
        d_offsets(num_experts + 1), d_row_of(n), d_source_of(n);
    device_buffer<char> scratch(std::size_t(cuda::permute_index_scratch_bytes(s)));
    cuda::permute_index(d_assigned.ptr, d_counts.ptr, d_offsets.ptr, d_row_of.ptr, d_source_of.ptr,
                        scratch.ptr, s, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_counts.host() == counts);
    CHECK(d_offsets.host() == offsets);
    CHECK(d_row_of.host() == row_of);
    auto got_source = d_source_of.host();
    got_source.resize(std::size_t(rows));
    CHECK(got_source == std::vector<std::int64_t>(source_of.begin(), source_of.begin() + rows));

    const auto x = muster::test::normal_draws(std::size_t(tokens * hidden), seed++);
    std::vector<float> permuted(std::size_t(rows * hidden));
    cpu::permute_rows(x.data(), source_of.data(), rows, permuted.data(), s);
    device_buffer<float> d_x(x), d_permuted(permuted.size());
    cuda::permute_rows(d_x.ptr, d_source_of.ptr, rows, d_permuted.ptr, s, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_permuted.host() == permuted);

    const auto weights = muster::test::normal_draws(n, seed++);
    const auto grad_y = muster::test::normal_draws(std::size_t(tokens * hidden), seed++);
    std::vector<float> y(std::size_t(tokens * hidden)), grad_rows(permuted.size()), grad_w(n);
    cpu::unpermute(permuted.data(), row_of.data(), weights.data(), y.data(), s);
    cpu::unpermute_backward(permuted.data(), row_of.data(), weights.data(), grad_y.data(),
                            grad_rows.data(), grad_w.data(), s);
    device_buffer<float> d_weights(weights), d_grad_y(grad_y), d_y(y.size()),
        d_grad_rows(grad_rows.size()), d_grad_w(n);
    cuda::unpermute(d_permuted.ptr, d_row_of.ptr, d_weights.ptr, d_y.ptr, s, nullptr);
    cuda::unpermute_backward(d_permuted.ptr, d_row_of.ptr, d_weights.ptr, d_grad_y.ptr,
                             d_grad_rows.ptr, d_grad_w.ptr, s, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::string y_report, rows_report, w_report;
    const double y_err = compare(d_y.host(), y, 1e-5, y_report);
    const double rows_err = compare(d_grad_rows.host(), grad_rows, 1e-6, rows_report);
    const double w_err = compare(d_grad_w.host(), grad_w, 1e-4, w_report);
    INFO("combine:\n" << y_report << "its backward, rows:\n" << rows_report << "weights:\n"
                       << w_report);
    CHECK(y_err <= 1e-5);
    CHECK(rows_err <= 1e-6);
    CHECK(w_err <= 1e-4);

    // bf16 rows, fp32 weights: the same kernels over the rows rounded to bf16
    const auto x16 = muster::test::to_bf16(x);
    std::vector<bf16> permuted16(permuted.size()), y16(y.size()), grad_rows16(grad_rows.size());
    const auto grad_y16 = muster::test::to_bf16(grad_y);
    cpu::permute_rows(x16.data(), source_of.data(), rows, permuted16.data(), s);
    cpu::unpermute(permuted16.data(), row_of.data(), weights.data(), y16.data(), s);
    cpu::unpermute_backward(permuted16.data(), row_of.data(), weights.data(), grad_y16.data(),
                            grad_rows16.data(), grad_w.data(), s);
    device_buffer<bf16> d_x16(x16), d_permuted16(permuted16.size()), d_y16(y16.size()),
        d_grad_y16(grad_y16), d_grad_rows16(grad_rows16.size());
    cuda::permute_rows(d_x16.ptr, d_source_of.ptr, rows, d_permuted16.ptr, s, nullptr);
    cuda::unpermute(d_permuted16.ptr, d_row_of.ptr, d_weights.ptr, d_y16.ptr, s, nullptr);
    cuda::unpermute_backward(d_permuted16.ptr, d_row_of.ptr, d_weights.ptr, d_grad_y16.ptr,
                             d_grad_rows16.ptr, d_grad_w.ptr, s, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::string gather16_report, y16_report, rows16_report, w16_report;
    const int gather16_ulps =
        muster::test::worst_ulps(d_permuted16.host(), permuted16, 0, gather16_report);
    const int y16_ulps = muster::test::worst_ulps(d_y16.host(), y16, 1, y16_report);
    const int rows16_ulps =
        muster::test::worst_ulps(d_grad_rows16.host(), grad_rows16, 1, rows16_report);
    const double w16_err = compare(d_grad_w.host(), grad_w, 1e-4, w16_report);
    INFO("bf16 gather:\n" << gather16_report << "combine:\n" << y16_report
                           << "its backward, rows:\n" << rows16_report << "weights:\n"
                           << w16_report);
    CHECK(gather16_ulps == 0);
    CHECK(y16_ulps <= 1);
    CHECK(rows16_ulps <= 1);
    CHECK(w16_err <= 1e-4);
  }
}

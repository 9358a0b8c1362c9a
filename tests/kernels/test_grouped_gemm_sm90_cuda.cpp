// muster's own Hopper grouped GEMM (grouped_gemm_method::sm90) over the experts' forward (B^T
// stored) and dgrad (B stored) against products computed plainly in double: one tile, tiles at
// every group edge (1, 127, 128, 129 rows), empty groups, n and k off the tile sizes (masked
// columns, zero-filled k), 256 groups of a few rows, and the ~1B bench's 32 experts of ~1024
// rows (rows sampled); each with both tile widths, with and without overlapping steps. The
// rows between groups and the columns between n and the stride must keep what they held.
// Where a result is wrong the report says which rows and columns, to read the layout fault
// from; two patterned cases (A picks one column of B) make a wrong swizzle or fragment mapping
// show as the index it read. Without a CUDA device: "SKIPPED: no CUDA device"; on a device that
// is not compute capability 9.0 the method runs cuBLAS, and the test says so.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "muster/kernels/grouped_gemm.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"
#include "tests/kernels/bf16_values.hpp"
#include "tests/kernels/cuda_test_support.hpp"
#include "tests/kernels/normal_draws.hpp"

using namespace muster::kernels;
using muster::test::device_buffer;

namespace {

using muster::kernels::bf16;

float rounded(float f) {
  return muster::kernels::to_float(muster::kernels::to_bf16(f));
}

constexpr std::uint16_t kUntouched = 0x7fc1;  // a NaN no product writes (bits)
constexpr std::int64_t kGap = 3;              // rows between two groups' rows

// picks_k: A's row i the unit vector at i % k, B[j][p] = p % 256, so C[i][j] = (i % k) % 256;
// picks_n: A's rows (1, 0, ...), B[j][0] = j % 256, so C[i][j] = j % 256; mixed: A as picks_k,
// B[j][p] = (7 p + j) % 256, so C[i][j] = (7 (i % k) + j) % 256 (a column moved within a row of
// B shows); random: normal draws.
enum class pattern { random, picks_k, picks_n, mixed };

// The experts' layout in bf16: x (rows, k) at lda, y (rows, n) at ldc, groups kGap rows apart;
// the weights stacked at ldb, (E, n, k) for the forward (C = A B^T, b_k_major) or (E, k, n) for
// the dgrad (C = A B). The gap rows of x hold 1e4, so a product that reads them into a kept row
// is far off.
struct forward_case {
  std::vector<std::int64_t> counts;
  std::int64_t n, k;
  bool b_k_major;
  std::int64_t lda, ldb, ldc;
  std::vector<std::int64_t> first_row;  // of each group, in x and y
  std::vector<float> x, w;              // the bf16 values, as floats
  // where B[j][p] (op(B) is (k, n)) of group e is in w
  std::size_t b_at(std::size_t e, std::int64_t j, std::int64_t p) const {
    return b_k_major ? std::size_t((std::int64_t(e) * n + j) * ldb + p)
                     : std::size_t((std::int64_t(e) * k + p) * ldb + j);
  }
  std::int64_t b_rows() const { return b_k_major ? n : k; }  // a group's rows of w
  forward_case(std::vector<std::int64_t> c, std::int64_t n_, std::int64_t k_, bool b_k, pattern p,
               std::uint32_t seed)
      : counts(std::move(c)), n(n_), k(k_), b_k_major(b_k) {
    const auto round8 = [](std::int64_t v) { return (v + 7) / 8 * 8; };
    lda = round8(k) + 8;
    ldb = b_k_major ? round8(k) : round8(n) + 8;
    ldc = round8(n) + 8;
    std::int64_t rows = 0;
    for (auto m : counts) {
      first_row.push_back(rows);
      rows += m + kGap;
    }
    x.assign(std::size_t(rows * lda), 1e4f);
    w.assign(std::size_t(std::int64_t(counts.size()) * b_rows() * ldb), 0.0f);
    const auto draws = muster::test::normal_draws(x.size() + w.size(), seed);
    for (std::size_t e = 0; e < counts.size(); ++e)
      for (std::int64_t i = 0; i < counts[e]; ++i)
        for (std::int64_t p_ = 0; p_ < k; ++p_) {
          const auto at = std::size_t((first_row[e] + i) * lda + p_);
          x[at] = p == pattern::random    ? draws[at]
                  : p == pattern::picks_n ? float(p_ == 0)
                                          : float(p_ == i % k);
        }
    for (std::size_t e = 0; e < counts.size(); ++e)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p_ = 0; p_ < k; ++p_) {
          const auto at = b_at(e, j, p_);
          w[at] = p == pattern::random    ? draws[x.size() + at]
                  : p == pattern::picks_k ? float(p_ % 256)
                  : p == pattern::mixed   ? float((7 * p_ + j) % 256)
                                          : (p_ == 0 ? float(j % 256) : 0.0f);
        }
    for (auto* v : {&x, &w})
      for (auto& f : *v) f = rounded(f);
  }
  std::int64_t rows() const { return std::int64_t(x.size()) / lda; }
};

// The groups' views, or the test stops saying why as_row_views refused them.
void require_views(const std::vector<gemm_group>& groups, const grouped_gemm_args& args) {
  std::string why;
  const bool taken = as_row_views(groups.data(), int(groups.size()), args, &why).has_value();
  INFO("as_row_views refused them: " << why);
  REQUIRE(taken);
}

// Runs the groups through sm90 with each tile width, with and without overlapping steps:
// `reset` before each run, `check` after it.
template <class Reset, class Check>
void each_variant(const std::vector<gemm_group>& groups, grouped_gemm_args args, const Reset& reset,
                  const Check& check) {
  for (const int tile_n : {128, 256})
    for (const bool overlap : {false, true}) {
      INFO("tile_n " << tile_n << " overlap " << overlap);
      args.sm90_tile_n = tile_n;
      args.sm90_overlap = overlap;
      reset();
      cuda::grouped_gemm(groups.data(), int(groups.size()), args, nullptr,
                         cuda::grouped_gemm_method::sm90);
      const auto synced = cudaDeviceSynchronize();
      INFO("CUDA: " << cudaGetErrorString(synced));
      REQUIRE(synced == cudaSuccess);
      check();
    }
}

// Runs the case through sm90 with each tile width and with and without overlapping steps, and
// checks every `row_step`-th row of each group (and its last) against double sums, and that
// nothing outside the groups' rows and n was written.
void check_case(const forward_case& f, std::int64_t row_step, bool exact) {
  device_buffer<bf16> x(muster::test::to_bf16(f.x)), w(muster::test::to_bf16(f.w));
  const std::vector<bf16> untouched(std::size_t(f.rows() * f.ldc), bf16{kUntouched});
  device_buffer<bf16> y(untouched);
  std::vector<gemm_group> groups;
  for (std::size_t e = 0; e < f.counts.size(); ++e)
    groups.push_back({f.counts[e], f.n, f.k, x.ptr + f.first_row[e] * f.lda, f.lda,
                      w.ptr + std::int64_t(e) * f.b_rows() * f.ldb, f.ldb,
                      y.ptr + f.first_row[e] * f.ldc, f.ldc});
  grouped_gemm_args args;
  args.trans_b = f.b_k_major;
  args.dtype = gemm_dtype::bf16;
  args.same_storage = true;  // x, the weights and y: one buffer each
  require_views(groups, args);

  // the sampled rows' products in double: (index in y, value), a group's scale
  std::vector<std::vector<std::pair<std::int64_t, double>>> want(f.counts.size());
  std::vector<double> scale(f.counts.size(), 1e-30);
  std::vector<bool> in_group(std::size_t(f.rows()), false);
  for (std::size_t e = 0; e < f.counts.size(); ++e) {
    const auto m = f.counts[e];
    for (std::int64_t i = 0; i < m; ++i) {
      const auto row = f.first_row[e] + i;
      in_group[std::size_t(row)] = true;
      if (i % row_step != 0 && i != m - 1) continue;
      for (std::int64_t j = 0; j < f.n; ++j) {
        double sum = 0;
        const float* a = &f.x[std::size_t(row * f.lda)];
        for (std::int64_t p = 0; p < f.k; ++p) sum += double(a[p]) * double(f.w[f.b_at(e, j, p)]);
        want[e].emplace_back(row * f.ldc + j, sum);
        scale[e] = std::max(scale[e], std::abs(sum));
      }
    }
  }

  const auto reset = [&] {
    REQUIRE(cudaMemcpy(y.ptr, untouched.data(), untouched.size() * 2, cudaMemcpyHostToDevice) ==
            cudaSuccess);
  };
  each_variant(groups, args, reset, [&] {
    const auto got = y.host();
    for (std::size_t e = 0; e < f.counts.size(); ++e) {
      double worst = 0;
      std::int64_t wrong = 0;
      std::ostringstream first;
      for (const auto& [at, value] : want[e]) {
        const double err =
            std::abs(double(muster::kernels::to_float(got[std::size_t(at)])) - value) / scale[e];
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
        // the patterns' values are integers up to 255, exact in bf16: any error is a fault
        if (!(err <= (exact ? 0.0 : 8e-3)) && wrong++ < 8)
          first << "  row " << at / f.ldc - f.first_row[e] << " col " << at % f.ldc << ": got "
                << muster::kernels::to_float(got[std::size_t(at)]) << " want " << value << "\n";
      }
      INFO("group " << e << " of " << f.counts[e] << " rows: " << wrong << " of " << want[e].size()
                    << " checked wrong, worst " << worst << "\n"
                    << first.str());
      CHECK(wrong == 0);
    }
    // untouched: the gap rows, and every row's columns from n to the stride
    std::int64_t written = 0;
    std::ostringstream where;
    for (std::int64_t r = 0; r < f.rows(); ++r)
      for (std::int64_t j = 0; j < f.ldc; ++j) {
        if (in_group[std::size_t(r)] && j < f.n) continue;
        if (got[std::size_t(r * f.ldc + j)].bits != kUntouched && written++ < 8)
          where << "  row " << r << " col " << j << "\n";
      }
    INFO(written << " elements outside the groups written:\n" << where.str());
    CHECK(written == 0);
  });
}

}  // namespace

TEST_CASE("the own Hopper grouped GEMM (sm90) matches plain products over the experts' forward",
          "[kernels][grouped_gemm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  int major = 0, minor = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess);
  if (major == 9 && minor == 0) {
    INFO(
        "an sm_90 device, but the build has no sm90 kernel: configure with 90 among "
        "CMAKE_CUDA_ARCHITECTURES (the default)");
    REQUIRE(cuda::sm90_available());
  } else {
    WARN("compute capability " << major << "." << minor << ", not 9.0: grouped_gemm_method::sm90 "
                               << "runs cuBLAS here, and the own kernel is not tested");
  }
  struct shape {
    std::vector<std::int64_t> counts;
    std::int64_t n, k;
  };
  const std::vector<shape> shapes{
      {{128}, 128, 64},                        // one tile, one step
      {{1, 127, 128, 0, 129, 300}, 128, 256},  // every edge of a 128-row tile
      {{200, 77}, 256, 128},                   // 256-column tiles
      {{64, 190}, 640, 1024},                  // the ~1B bench's width: five 128-column tiles
      {{100, 50}, 1280, 64},                   // gate and up stacked: five 256-column tiles
      {{33, 70}, 100, 200},                    // n and k off the tiles: masked, zero-filled
      {{130}, 72, 8},                          // a narrow n and a k of one 16-byte row
  };
  std::uint32_t seed = 901;
  for (const bool b_k_major : {true, false})  // the forward's B^T, the dgrad's B
    for (const auto p : {pattern::picks_k, pattern::picks_n, pattern::mixed, pattern::random})
      for (const auto& s : shapes) {
        INFO((b_k_major ? "C = A B^T" : "C = A B")
             << ", pattern " << int(p) << ", groups " << s.counts.size() << " from " << s.counts[0]
             << " rows, n " << s.n << " k " << s.k);
        check_case(forward_case(s.counts, s.n, s.k, b_k_major, p, seed++), 1, p != pattern::random);
      }
  // 256 groups of 0 to 40 rows: a tile walk over many groups, empty ones among them
  std::mt19937 gen(7);
  std::vector<std::int64_t> small(256);
  for (auto& m : small) m = std::uniform_int_distribution<std::int64_t>(0, 40)(gen);
  for (const bool b_k_major : {true, false}) {
    INFO("256 small groups, B^T " << b_k_major);
    check_case(forward_case(small, 128, 64, b_k_major, pattern::random, seed++), 1, false);
  }
  // the ~1B bench (bench/gpu/moe-1b.toml): 32 experts of ~1024 rows; the forward 1024 -> 640
  // and the gate and up stacked (-> 1280), and their dgrads back to 1024; every 29th row checked
  std::vector<std::int64_t> experts(32);
  for (auto& m : experts) m = std::uniform_int_distribution<std::int64_t>(900, 1150)(gen);
  for (const std::int64_t width : {640, 1280})
    for (const bool b_k_major : {true, false}) {
      const auto n = b_k_major ? width : 1024, k = b_k_major ? 1024 : width;
      INFO("32 experts of ~1024 rows, n " << n << " k " << k << " B^T " << b_k_major);
      check_case(forward_case(experts, n, k, b_k_major, pattern::random, seed++), 29, false);
    }
}

namespace {

// The wgrad as the engine runs it through sm90 (engine/ops/grouped_linear_op.cpp, wgrad_sm90):
// dW_e (out, in) = dyT_e (out, k_e) x_e (k_e, in) over dy^T with each expert's columns padded
// with zeros to its reduction k_e, x's rows from each expert's first, the last experts'
// reaching past x's end (read as zeros: x's buffer ends there). k_e: one common reduction (the
// largest count rounded up to 64), or (per_expert) each expert's count rounded up to 64, the
// groups' k then differing. Experts with no rows have no group and their gradient stays as it
// was. Every `f_step`-th row of each dW checked. into_f32: dW is added to fp32 gradients
// holding an earlier sum (c_f32, beta 1), as the engine's wgrad under bf16 autocast; else
// written in bf16.
void check_wgrad(const std::vector<std::int64_t>& counts, std::int64_t out, std::int64_t in,
                 std::int64_t f_step, std::uint32_t seed, bool into_f32, bool per_expert = false) {
  std::int64_t total = 0, largest = 0;
  for (auto c : counts) {
    total += c;
    largest = std::max(largest, c);
  }
  const auto up64 = [](std::int64_t c) { return (c + 63) / 64 * 64; };
  std::vector<std::int64_t> start, first, k;
  std::int64_t padded = 0, r = 0;
  for (auto c : counts) {
    start.push_back(r);
    first.push_back(padded);
    k.push_back(per_expert ? up64(c) : up64(largest));
    r += c;
    padded += c > 0 ? k.back() : 0;
  }
  std::vector<float> dy = muster::test::normal_draws(std::size_t(total * out), seed),
                     x = muster::test::normal_draws(std::size_t(total * in), seed + 1);
  for (auto* v : {&dy, &x})
    for (auto& f : *v) f = rounded(f);
  std::vector<float> dy_t(std::size_t(out * padded), 0.0f);
  for (std::size_t e = 0; e < counts.size(); ++e)
    for (std::int64_t i = 0; i < counts[e]; ++i)
      for (std::int64_t f = 0; f < out; ++f)
        dy_t[std::size_t(f * padded + first[e] + i)] = dy[std::size_t((start[e] + i) * out + f)];
  // x's buffer goes on past its rows with NaN: a read past b_view_rows that is not the kernel's
  // zeros makes the products past it NaN (dy^T's padding is zero, and 0 * NaN is NaN)
  auto x_stored = muster::test::to_bf16(x);
  x_stored.resize(x_stored.size() + std::size_t(64 * in), bf16{kUntouched});
  device_buffer<bf16> d_dy_t(muster::test::to_bf16(dy_t)), d_x(x_stored);
  const std::vector<bf16> untouched(counts.size() * std::size_t(out * in), bf16{kUntouched});
  device_buffer<bf16> d_dw(untouched);
  std::vector<float> earlier(untouched.size());
  for (std::size_t i = 0; i < earlier.size(); ++i) earlier[i] = 0.5f * float(i % 5) - 1.0f;
  device_buffer<float> d_grads(earlier);
  std::vector<gemm_group> groups;
  for (std::size_t e = 0; e < counts.size(); ++e)
    if (counts[e] > 0)
      groups.push_back({out, in, k[e], d_dy_t.ptr + first[e], padded, d_x.ptr + start[e] * in, in,
                        into_f32 ? static_cast<void*>(d_grads.ptr + std::int64_t(e) * out * in)
                                 : static_cast<void*>(d_dw.ptr + std::int64_t(e) * out * in),
                        in});
  grouped_gemm_args args;
  args.dtype = gemm_dtype::bf16;
  args.c_f32 = into_f32;
  args.beta = into_f32 ? 1.0f : 0.0f;
  args.same_storage = true;
  args.b_view_rows = total;  // x's rows, not its buffer's
  require_views(groups, args);
  // the sampled rows of each dW in double: (index in dW, value), and its scale
  std::vector<std::vector<std::pair<std::int64_t, double>>> want(counts.size());
  std::vector<double> scale(counts.size(), 1e-30);
  for (std::size_t e = 0; e < counts.size(); ++e)
    for (std::int64_t f = 0; f < out && counts[e] > 0; f += f_step)
      for (std::int64_t h = 0; h < in; ++h) {
        double sum = 0;
        for (std::int64_t i = 0; i < counts[e]; ++i)
          sum += double(dy[std::size_t((start[e] + i) * out + f)]) *
                 double(x[std::size_t((start[e] + i) * in + h)]);
        want[e].emplace_back(f * in + h, sum);
        scale[e] = std::max(scale[e], std::abs(sum));
      }
  const auto reset = [&] {
    REQUIRE(cudaMemcpy(d_dw.ptr, untouched.data(), untouched.size() * 2, cudaMemcpyHostToDevice) ==
            cudaSuccess);
    REQUIRE(cudaMemcpy(d_grads.ptr, earlier.data(), earlier.size() * 4, cudaMemcpyHostToDevice) ==
            cudaSuccess);
  };
  each_variant(groups, args, reset, [&] {
    // what each dW holds less what it held (into_f32), as doubles
    const auto got_bf16 = d_dw.host();
    const auto got_f32 = d_grads.host();
    const auto added = [&](std::size_t i) {
      return into_f32 ? double(got_f32[i]) - double(earlier[i])
                      : double(muster::kernels::to_float(got_bf16[i]));
    };
    for (std::size_t e = 0; e < counts.size(); ++e) {
      const auto at0 = e * std::size_t(out * in);
      if (counts[e] == 0) {
        std::int64_t written = 0;
        for (std::size_t i = at0; i < at0 + std::size_t(out * in); ++i)
          written += into_f32 ? got_f32[i] != earlier[i] : got_bf16[i].bits != kUntouched;
        INFO("expert " << e << " has no rows");
        CHECK(written == 0);
        continue;
      }
      std::int64_t wrong = 0;
      std::ostringstream first_wrong;
      // bf16: the output's rounding; fp32: sums of ~1000 products in fp32
      const double bound = into_f32 ? 1e-4 : 8e-3;
      for (const auto& [at, value] : want[e]) {
        const double got = added(at0 + std::size_t(at));
        const double err = std::abs(got - value) / scale[e];
        if (!(err <= bound) && wrong++ < 8)
          first_wrong << "  row " << at / in << " col " << at % in << ": got " << got << " want "
                      << value << "\n";
      }
      INFO("expert " << e << " of " << counts[e] << " rows: " << wrong << " of " << want[e].size()
                     << " checked wrong\n"
                     << first_wrong.str());
      CHECK(wrong == 0);
    }
  });
}

}  // namespace

TEST_CASE("the own Hopper grouped GEMM (sm90) runs the experts' wgrad over the padded dy^T",
          "[kernels][grouped_gemm][gpu]") {
  if (!muster::test::have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  if (!cuda::sm90_available()) {
    WARN("no sm90 kernel on this device or build: the wgrad form (b_view_rows) is its alone");
    return;
  }
  {
    INFO("4 experts, one empty, 80 x 96");
    check_wgrad({40, 0, 60, 7}, 80, 96, 1, 1201, false);
    check_wgrad({40, 0, 60, 7}, 80, 96, 1, 1202, true);
  }
  {
    INFO("4 experts, one empty, each its own reduction (64, 192, 64), 80 x 96");
    check_wgrad({40, 0, 130, 7}, 80, 96, 1, 1211, false, true);
    check_wgrad({40, 0, 130, 7}, 80, 96, 1, 1212, true, true);
  }
  std::mt19937 gen(11);
  std::vector<std::int64_t> experts(32);
  for (auto& m : experts) m = std::uniform_int_distribution<std::int64_t>(900, 1150)(gen);
  for (const std::int64_t out : {640, 1280}) {
    INFO("32 experts of ~1024 rows, " << out << " x 1024");
    check_wgrad(experts, out, 1024, 17, 1301, out == 1280);  // the stacked gate|up into fp32
  }
  // routing out of balance, where the engine pads each expert's reduction (common_reduction 0)
  for (auto& m : experts) m = std::uniform_int_distribution<std::int64_t>(0, 2300)(gen);
  experts[3] = 0;
  for (const bool into_f32 : {false, true}) {
    INFO("32 experts of 0..2300 rows, each its own reduction, 640 x 1024");
    check_wgrad(experts, 640, 1024, 17, 1311, into_f32, true);
  }
}

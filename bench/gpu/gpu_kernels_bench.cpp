// gpu_kernels_bench: each CUDA kernel of kernels/ on the GPU, side by side with the PyTorch ops
// it replaces, in one run on one device:
//   - memory-bound ops (router forward and backward, permutation index + gather, weighted
//     combine, SwiGLU, RMSNorm, the wgrad's gathered dy^T; fp32, and bf16 where the engine's bf16
//     autocast sends bf16 through them): the bytes each must move / time, as a share of the
//     device's peak memory bandwidth (from its memory clock and bus width) and of a
//     device-to-device copy measured here;
//   - the grouped GEMM (bf16, one group per expert, uneven rows), by each method: TFLOP/s against
//     one dense cuBLAS product of the same FLOPs (torch::mm over all rows at once), and the
//     host's time a call when the experts' counts change at every call, as in training;
//     split_batched also with levels of any size and with one level, to weigh its defaults;
//   - q, k and v as one joined product (ops::joined_linear) against three torch linears, forward
//     and backward under bf16 autocast: device and host time a call;
//   - last, on sm_90, the own Hopper grouped GEMM (sm90) on the same shapes, each way beside its
//     dense product again: a fault in it, the newest kernel, costs no other row;
// Targets (issue 9): the memory-bound ops at 70% or more of peak bandwidth, the grouped GEMM at
// 80% or more of the dense product. Without a device it says "SKIPPED: no CUDA device".
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "engine/model/autocast_scope.hpp"
#include "engine/ops/linear_op.hpp"
#include "engine/ops/wgrad_operands.hpp"

#include "muster/kernels/gather_transpose.hpp"
#include "muster/kernels/grouped_gemm.hpp"
#include "muster/kernels/grouped_gemm_rows.hpp"
#include "muster/kernels/optimizer.hpp"
#include "muster/kernels/permute.hpp"
#include "muster/kernels/rms_norm.hpp"
#include "muster/kernels/router.hpp"
#include "muster/kernels/swiglu.hpp"

namespace k = muster::kernels;

namespace {

// Milliseconds per call of f, the median of 5 timed batches of `reps` after 3 warm-ups.
double time_ms(const std::function<void()>& f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> batches;
  for (int t = 0; t < 5; ++t) {
    cudaEventRecord(a, nullptr);
    for (int i = 0; i < reps; ++i) f();
    cudaEventRecord(b, nullptr);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    batches.push_back(ms / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(batches.begin(), batches.end());
  return batches[2];
}

struct peaks {
  double spec_gbs = 0, copy_gbs = 0;
};

peaks measure_peaks() {
  peaks p;
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  p.spec_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
  const std::size_t bytes = std::size_t(1) << 31;
  auto src = torch::empty({std::int64_t(bytes)}, torch::dtype(torch::kUInt8).device(torch::kCUDA));
  auto dst = torch::empty_like(src);
  const double ms = time_ms([&] {
    cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice, nullptr);
  });
  p.copy_gbs = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;  // read and written
  return p;
}

// A bf16 tensor's elements as the kernels' bf16 (the same two bytes).
k::bf16* bf16_ptr(const torch::Tensor& t) {
  return reinterpret_cast<k::bf16*>(t.data_ptr<at::BFloat16>());
}

void row(const char* what, double bytes, double ms_ours, double ms_torch, const peaks& p) {
  const double gbs = bytes / (ms_ours * 1e-3) / 1e9;
  std::printf("%-34s %9.3f %9.3f %7.2fx %8.0f %6.1f%% %6.1f%%\n", what, ms_ours, ms_torch,
              ms_torch / ms_ours, gbs, 100 * gbs / p.spec_gbs, 100 * gbs / p.copy_gbs);
}

// The experts' products, laid out as the engine lays them: the forward (x's row blocks times
// their weights: m varies), the dgrad (dy's row blocks times the weights as stored), the wgrad as
// dy_e^T x_e (the reduction varies, A transposed), the wgrad as the engine runs it, dyT_e x_e over
// dy transposed with each expert's block starting on a multiple of 8 and its reduction padded to
// one (engine/ops/wgrad_operands.hpp; no operand transposed), the same with each reduction its
// count (as the engine ran it before), and with one reduction for every expert, the largest count
// rounded up to 64 (what the engine runs on a GPU where common_reduction takes it: one product
// shape), and with each reduction its count rounded up to 64 (what the engine runs for sm90
// where common_reduction does not take it). FLOP/s count the experts' own rows.
enum class form {
  forward,
  dgrad,
  wgrad_dy_t,
  wgrad_aligned,
  wgrad_counted_k,
  wgrad_common,
  wgrad_padded64
};

// An expert's count rounded up as the engine pads its wgrad's reduction and dy^T's blocks.
std::int64_t padded_count(std::int64_t rows) {
  return (rows + muster::engine::ops::kColumnAlign - 1) / muster::engine::ops::kColumnAlign *
         muster::engine::ops::kColumnAlign;
}

struct expert_buffers {
  static constexpr std::int64_t kMostCommon = 4096;  // the largest common reduction they hold
  std::int64_t H, F;
  torch::Tensor x, y, y_t;       // rows (total, H), (total, F); y transposed (F, padded)
  std::vector<torch::Tensor> w;  // (F, H) each, views of one (E, F, H) as the engine stacks them
  expert_buffers(std::int64_t most_rows, std::int64_t experts, std::int64_t h, std::int64_t f)
      : H(h), F(f) {
    const auto bf16 = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
    // the last experts' padded reductions read past the rows: 7 more, or up to a common one
    x = torch::randn({most_rows + kMostCommon, H}, bf16);
    y = torch::randn({most_rows, F}, bf16);
    y_t = torch::randn({F, std::max(most_rows + 8 * experts, experts * kMostCommon)}, bf16);
    const auto stacked = torch::randn({experts, F, H}, bf16);
    for (std::int64_t e = 0; e < experts; ++e) w.push_back(stacked[e]);
  }

  std::vector<k::gemm_group> groups(const std::vector<std::int64_t>& rows, form f) const {
    std::int64_t padded = 0, largest = 0;
    for (auto r : rows) largest = std::max(largest, r);
    const auto common = (largest + muster::engine::ops::kCommonAlign - 1) /
                        muster::engine::ops::kCommonAlign * muster::engine::ops::kCommonAlign;
    if (f == form::wgrad_common && common > kMostCommon)
      throw std::runtime_error("expert_buffers: a common reduction over 4096");
    const auto reduction = [&](std::int64_t r) {
      constexpr auto kStep = k::kRowViewsStepK;
      if (f == form::wgrad_padded64) return (r + kStep - 1) / kStep * kStep;
      return f == form::wgrad_common && r > 0 ? common : padded_count(r);
    };
    for (auto r : rows) padded += reduction(r);
    std::vector<k::gemm_group> out;
    std::int64_t r0 = 0, c0 = 0;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      auto* x_rows = static_cast<char*>(x.data_ptr()) + r0 * H * 2;
      auto* y_rows = static_cast<char*>(y.data_ptr()) + r0 * F * 2;
      auto* y_cols = static_cast<char*>(y_t.data_ptr()) + c0 * 2;
      if (f == form::forward)
        out.push_back({rows[e], F, H, x_rows, H, w[e].data_ptr(), H, y_rows, F});
      else if (f == form::dgrad)  // dx_e (rows, H) = dy_e (rows, F) W_e (F, H), into x
        out.push_back({rows[e], H, F, y_rows, F, w[e].data_ptr(), H, x_rows, H});
      else if (f == form::wgrad_dy_t)  // dW_e (F, H) = dy_e^T (F, rows) x_e (rows, H)
        out.push_back({F, H, rows[e], y_rows, F, x_rows, H, w[e].data_ptr(), H});
      else if (f == form::wgrad_counted_k)  // dW_e (F, H) = dyT_e (F, rows) x_e (rows, H)
        out.push_back({F, H, rows[e], y_cols, padded, x_rows, H, w[e].data_ptr(), H});
      else  // the same with k padded to a multiple of 8 or 64 or the common one, into the next
            // rows
        out.push_back({F, H, reduction(rows[e]), y_cols, padded, x_rows, H, w[e].data_ptr(), H});
      r0 += rows[e];
      c0 += reduction(rows[e]);
    }
    return out;
  }
};

k::grouped_gemm_args args_for(form f) {
  k::grouped_gemm_args args;
  args.trans_a = f == form::wgrad_dy_t;
  args.trans_b = f == form::forward;
  args.dtype = k::gemm_dtype::bf16;
  args.same_storage = true;  // x, y, y^T and the stacked weights: one tensor each
  return args;
}

// Counts as a router's change from step to step: the base counts moved by up to 8 rows each,
// by a hash of the call and the expert, so that each call's sizes are new to cuBLAS's heuristic
// cache (callers give every method and form calls of their own).
std::vector<std::int64_t> counts_at(const std::vector<std::int64_t>& base, int call) {
  std::vector<std::int64_t> out;
  for (std::size_t e = 0; e < base.size(); ++e) {
    std::uint64_t h = (std::uint64_t(call) << 32) ^ (e * 0x9e3779b97f4a7c15ull);
    h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    out.push_back(std::max<std::int64_t>(0, base[e] + std::int64_t(h % 17) - 8));
  }
  return out;
}

// One grouped product by each method this cuBLAS has, against one dense product of the same
// FLOPs, bf16: GPU time at fixed counts, and the host's time a call when the counts change at
// every call as a router's do (what a host-bound training step pays: the launches and cuBLAS's
// heuristic queries for sizes it has not seen). The host time is the wall time of issuing 40
// calls; a method whose pointer arrays are copied from pageable memory may wait for the GPU
// there too, as it would in training.
// own: the own Hopper kernel's ways (sm90) rather than cuBLAS's. A way that throws (a CUDA
// error, a refusal) prints FAILED with the reason and the next way runs.
void grouped_gemm_row(const char* shape, const std::vector<std::int64_t>& rows, std::int64_t H,
                      std::int64_t F, form f, bool own) {
  // the own kernel runs the forward, the dgrad and the wgrad over reductions of whole steps
  // (else it is automatic again), on sm_90
  if (own &&
      (!k::cuda::sm90_available() || !(f == form::forward || f == form::dgrad ||
                                       f == form::wgrad_common || f == form::wgrad_padded64)))
    return;
  std::int64_t total = 0;
  for (auto r : rows) total += r;
  constexpr int kHostCalls = 40;
  const expert_buffers buf(total + 8 * std::int64_t(rows.size()), std::int64_t(rows.size()), H, F);
  const auto groups = buf.groups(rows, f);
  const double flops = 2.0 * double(total) * double(H) * double(F);
  const auto x = buf.x.narrow(0, 0, total), y = buf.y.narrow(0, 0, total);
  auto dense_w = torch::randn({H, F}, x.options());
  // timed next to each method: a method timed against a dense product timed long before it
  // would carry the clock's drift over the run (on the H200 "automatic", which ran the same
  // products as "per group" five rows later, came out 10% slower in two leases)
  const auto dense_ms = [&] {
    if (f == form::forward) return time_ms([&] { auto d = torch::mm(x, dense_w); });
    if (f == form::dgrad) return time_ms([&] { auto d = torch::mm(y, dense_w.t()); });
    return time_ms([&] { auto d = torch::mm(y.t(), x); });
  };
  using method = k::cuda::grouped_gemm_method;
  struct way {
    method m;
    const char* name;
    int split_levels = 3;
    std::int64_t split_quantum = 64;
    int sm90_tile_n = 0;
    bool sm90_overlap = true;
  };
  // split_batched as the engine runs it (3 levels in multiples of 64 rows), and others: levels
  // of any size (a new shape for cuBLAS at every new count), in whole 128-row tiles (a larger
  // rest), and one level (fewer kernels)
  const way ways[] = {{method::grouped_batched, "grouped batched"},
                      {method::per_group, "per group"},
                      {method::split_batched, "split batched"},
                      {method::split_batched, "split any rows", 3, 1},
                      {method::split_batched, "split in 128s", 3, 128},
                      {method::split_batched, "split 1 level", 1, 64},
                      {method::automatic, "automatic"},
                      // the own Hopper kernel as the engine runs it, then each tile width and
                      // without overlapped steps
                      {method::sm90, "sm90 (own)"},
                      {method::sm90, "sm90 tile 128", 3, 64, 128},
                      {method::sm90, "sm90 tile 256", 3, 64, 256},
                      {method::sm90, "sm90 no overlap", 3, 64, 0, false}};
  int offset = 1000 * int(f) + (own ? 500 : 0);  // each method and form its own counts
  for (const auto& w : ways) {
    const auto m = w.m;
    const auto* name = w.name;
    if ((m == method::sm90) != own) continue;
    auto args = args_for(f);
    args.split_levels = w.split_levels;
    args.split_quantum = w.split_quantum;
    args.sm90_tile_n = w.sm90_tile_n;
    args.sm90_overlap = w.sm90_overlap;
    if (m == method::grouped_batched && !k::cuda::grouped_batched_available()) continue;
    try {
      const double dense = dense_ms();
      const double ms = time_ms(
          [&] { k::cuda::grouped_gemm(groups.data(), int(groups.size()), args, nullptr, m); });
      std::vector<std::vector<k::gemm_group>> changing;
      for (int c = 0; c < kHostCalls; ++c)
        changing.push_back(buf.groups(counts_at(rows, offset + c), f));
      offset += kHostCalls;
      cudaDeviceSynchronize();
      const auto began = std::chrono::steady_clock::now();
      for (const auto& g : changing)
        k::cuda::grouped_gemm(g.data(), int(g.size()), args, nullptr, m);
      const double host_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began)
              .count() /
          kHostCalls;
      cudaDeviceSynchronize();
      std::printf(
          "grouped gemm %-30s %-16s %9.3f %9.3f %7.2fx %6.0f TFLOP/s (dense %0.0f): %5.1f%% of "
          "dense; host %6.0f us a call at new counts\n",
          shape, name, ms, dense, dense / ms, flops / (ms * 1e-3) / 1e12,
          flops / (dense * 1e-3) / 1e12, 100 * dense / ms, host_us);
    } catch (const std::exception& e) {
      std::printf("grouped gemm %-30s %-16s FAILED: %s\n", shape, name, e.what());
    }
  }
}

// q, k and v of the ~1B bench's attention (hidden 1024, 16 heads and 8 kv heads of 64) over
// 4 x 2048 tokens, forward and backward under bf16 autocast, the weights' gradients views of one
// buffer as their FSDP unit lays them: one joined product (ops::joined_linear, what the engine
// runs) against three torch linears (what it ran before). The device's time a call, and the
// host's (calls enqueued back to back; backward returns when its nodes have run on the host).
void joined_qkv_row() {
  torch::AutoGradMode grad_on(true);
  const std::int64_t tokens = 8192, hidden = 1024;
  const std::vector<std::int64_t> outs{1024, 512, 512};
  const auto f32 = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  auto params = torch::randn({2048 * hidden}, f32) * 0.02, grads = torch::zeros_like(params);
  std::vector<torch::nn::Linear> layers;
  std::int64_t at = 0;
  for (auto out : outs) {
    torch::nn::Linear layer(torch::nn::LinearOptions(hidden, out).bias(false));
    layer->to(torch::kCUDA);
    layer->weight.set_data(params.narrow(0, at, out * hidden).view({out, hidden}));
    layer->weight.mutable_grad() = grads.narrow(0, at, out * hidden).view({out, hidden});
    layers.push_back(layer);
    at += out * hidden;
  }
  auto x = torch::randn({tokens, hidden}, f32).requires_grad_(true);
  const auto g = torch::randn({tokens, 2048}, f32).to(torch::kBFloat16).split_with_sizes(outs, 1);
  namespace model = muster::engine::model;
  const auto joined = [&] {
    model::autocast_scope mixed(model::autocast_state::bf16(true));
    const auto y = muster::engine::ops::joined_linear(x, layers);
    if (!y.defined()) throw std::runtime_error("joined_linear refused the laid-out q, k and v");
    torch::autograd::backward(y.split_with_sizes(outs, 1), g);
  };
  const auto apart = [&] {
    model::autocast_scope mixed(model::autocast_state::bf16(true));
    std::vector<torch::Tensor> ys;
    for (const auto& layer : layers) ys.push_back(torch::linear(x, layer->weight));
    torch::autograd::backward(ys, g);
  };
  const auto host_us = [](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    cudaDeviceSynchronize();
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) f();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began)
            .count() /
        20;
    cudaDeviceSynchronize();
    return us;
  };
  const double ours = time_ms(joined), theirs = time_ms(apart);
  std::printf(
      "q|k|v fwd+bwd %lldx%lld bf16: joined %.3f ms, three linears %.3f ms (%.2fx); host %.0f "
      "us against %.0f us a call\n",
      (long long)tokens, (long long)hidden, ours, theirs, theirs / ours, host_us(joined),
      host_us(apart));
}

}  // namespace

int main() {
  // a line at a time into check.sh's log: a trap or a timeout then loses no finished row
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("gpu_kernels_bench: SKIPPED: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const auto p = measure_peaks();
  std::printf("device: %s, %d SMs; peak memory bandwidth %.0f GB/s (spec), %.0f GB/s (copy)\n",
              prop.name, prop.multiProcessorCount, p.spec_gbs, p.copy_gbs);
  std::printf("%-34s %9s %9s %8s %8s %7s %7s\n", "op (ours vs torch)", "ours ms", "torch ms",
              "speedup", "GB/s", "%spec", "%copy");
  torch::NoGradGuard no_grad;
  const auto f32 = torch::dtype(torch::kFloat32).device(torch::kCUDA);
  const auto i64 = torch::dtype(torch::kInt64).device(torch::kCUDA);

  // The router: 65536 tokens over 256 experts, top 8 (DeepSeek-V3's shape), softmax, renorm.
  {
    const std::int64_t T = 65536, E = 256;
    const int K = 8;
    auto logits = torch::randn({T, E}, f32);
    auto scores = torch::empty_like(logits);
    auto experts = torch::empty({T, K}, i64);
    auto weights = torch::empty({T, K}, f32);
    k::router_shape s;
    s.num_tokens = T;
    s.num_experts = E;
    s.topk = K;
    s.renormalize = true;
    const double ours = time_ms([&] {
      k::cuda::router_forward(logits.data_ptr<float>(), scores.data_ptr<float>(),
                              experts.data_ptr<std::int64_t>(), weights.data_ptr<float>(), s,
                              nullptr);
    });
    const double theirs = time_ms([&] {
      auto sc = torch::softmax(logits, -1);
      auto [top, idx] = sc.topk(K, -1);
      auto w = top / top.sum(-1, true);
    });
    row("router fwd 65536x256 k8", double(T * E * 4 * 2 + T * K * 12), ours, theirs, p);
    // The same rows with fewer rounds of the top-k, and sigmoid's scores (no warp sums): the
    // share of the forward's time its top-k rounds and its softmax take, at the same bytes
    // (to within the (T, k) outputs)
    for (const auto& [k_of, sigmoid] : {std::pair{1, false}, {2, false}, {4, false}, {8, true}}) {
      auto variant = s;
      variant.topk = k_of;
      variant.score = sigmoid ? k::router_score::sigmoid : k::router_score::softmax;
      const double ms = time_ms([&] {
        k::cuda::router_forward(logits.data_ptr<float>(), scores.data_ptr<float>(),
                                experts.data_ptr<std::int64_t>(), weights.data_ptr<float>(),
                                variant, nullptr);
      });
      const double torch_ms = time_ms([&] {
        auto sc = sigmoid ? torch::sigmoid(logits) : torch::softmax(logits, -1);
        auto [top, idx] = sc.topk(k_of, -1);
        auto w = top / top.sum(-1, true);
      });
      const auto name = std::string("router fwd 65536x256 k") + std::to_string(k_of) +
                        (sigmoid ? " sigmoid" : "");
      row(name.c_str(), double(T * E * 4 * 2 + T * k_of * 12), ms, torch_ms, p);
    }

    // its backward with the scores' own gradient (an auxiliary loss's): torch's is the same
    // sums written as ops (the renormalisation's, the scatter, the softmax's)
    auto grad_weights = torch::randn({T, K}, f32);
    auto grad_scores = torch::randn({T, E}, f32);
    auto grad_logits = torch::empty_like(logits);
    const double ours_back = time_ms([&] {
      k::cuda::router_backward(scores.data_ptr<float>(), experts.data_ptr<std::int64_t>(),
                               grad_weights.data_ptr<float>(), grad_scores.data_ptr<float>(),
                               grad_logits.data_ptr<float>(), s, nullptr);
    });
    const double theirs_back = time_ms([&] {
      auto pe = scores.gather(1, experts);
      auto total = pe.sum(-1, true);
      auto gw = (grad_weights - (grad_weights * pe).sum(-1, true) / total) / total;
      auto g = grad_scores.scatter_add(1, experts, gw);
      auto dx = scores * (g - (scores * g).sum(-1, true));
    });
    row("router bwd 65536x256 k8", double(T * E * 4 * 3 + T * K * 12), ours_back, theirs_back, p);
  }

  // The permutation: 16384 tokens, top 8 of 64 experts, rows of 4096 fp32.
  {
    const std::int64_t T = 16384, E = 64, H = 4096;
    const int K = 8;
    k::permute_shape s;
    s.num_tokens = T;
    s.topk = K;
    s.num_experts = E;
    s.hidden = H;
    auto experts = torch::randint(0, E, {T, K}, i64);
    auto x = torch::randn({T, H}, f32);
    auto counts = torch::empty({E}, i64), offsets = torch::empty({E + 1}, i64);
    auto row_of = torch::empty({T * K}, i64), source_of = torch::empty({T * K}, i64);
    auto scratch = torch::empty({k::cuda::permute_index_scratch_bytes(s)},
                                torch::dtype(torch::kUInt8).device(torch::kCUDA));
    auto index = [&] {
      k::cuda::permute_index(experts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>(),
                             offsets.data_ptr<std::int64_t>(), row_of.data_ptr<std::int64_t>(),
                             source_of.data_ptr<std::int64_t>(), scratch.data_ptr(), s, nullptr);
    };
    const double ours_index = time_ms(index);
    const double torch_index = time_ms([&] {
      auto flat = experts.reshape({-1});
      auto order = std::get<1>(flat.sort(c10::optional<bool>(true), 0));
      auto c = torch::bincount(flat, {}, E);
    });
    row("permute index 16384x8 of 64", double(T * K * 8 * 3), ours_index, torch_index, p);
    index();
    auto rows = torch::empty({T * K, H}, f32);
    const double ours_gather = time_ms([&] {
      k::cuda::permute_rows(x.data_ptr<float>(), source_of.data_ptr<std::int64_t>(), T * K,
                            rows.data_ptr<float>(), s, nullptr);
    });
    const auto tokens = torch::div(source_of, K, "floor");
    const double torch_gather = time_ms([&] { auto r = x.index_select(0, tokens); });
    row("permute rows 131072x4096 fp32", double(T * K * H * 4 * 2), ours_gather, torch_gather, p);
    auto w = torch::rand({T, K}, f32);
    auto y = torch::empty({T, H}, f32);
    const double ours_combine = time_ms([&] {
      k::cuda::unpermute(rows.data_ptr<float>(), row_of.data_ptr<std::int64_t>(),
                         w.data_ptr<float>(), y.data_ptr<float>(), s, nullptr);
    });
    const auto wf = w.reshape({-1}).index_select(0, source_of);
    const double torch_combine = time_ms([&] {
      auto out = torch::zeros({T, H}, f32).index_add_(0, tokens, rows * wf.unsqueeze(1));
    });
    row("unpermute (weighted) 16384x4096", double(T * K * H * 4 + T * H * 4), ours_combine,
        torch_combine, p);

    // bf16 rows (the experts' outputs under bf16 autocast), fp32 weights; torch's path is what
    // the engine ran before the bf16 kernels: the weights cast to bf16, a bf16 index_add.
    auto x16 = x.to(torch::kBFloat16), rows16 = rows.to(torch::kBFloat16);
    auto y16 = torch::empty({T, H}, x16.options());
    const double ours_gather16 = time_ms([&] {
      k::cuda::permute_rows(bf16_ptr(x16), source_of.data_ptr<std::int64_t>(), T * K,
                            bf16_ptr(rows16), s, nullptr);
    });
    const double torch_gather16 = time_ms([&] { auto r = x16.index_select(0, tokens); });
    row("permute rows 131072x4096 bf16", double(T * K * H * 2 * 2), ours_gather16, torch_gather16,
        p);
    const double ours_combine16 = time_ms([&] {
      k::cuda::unpermute(bf16_ptr(rows16), row_of.data_ptr<std::int64_t>(), w.data_ptr<float>(),
                         bf16_ptr(y16), s, nullptr);
    });
    const auto wf16 = wf.to(torch::kBFloat16);
    const double torch_combine16 = time_ms([&] {
      auto out =
          torch::zeros({T, H}, x16.options()).index_add_(0, tokens, rows16 * wf16.unsqueeze(1));
    });
    row("unpermute (weighted) 16384x4096 bf16", double(T * K * H * 2 + T * H * 2), ours_combine16,
        torch_combine16, p);
    auto grad_rows16 = torch::empty_like(rows16);
    auto grad_w = torch::empty_like(w);
    const double ours_combine_back16 = time_ms([&] {
      k::cuda::unpermute_backward(bf16_ptr(rows16), row_of.data_ptr<std::int64_t>(),
                                  w.data_ptr<float>(), bf16_ptr(y16), bf16_ptr(grad_rows16),
                                  grad_w.data_ptr<float>(), s, nullptr);
    });
    const double torch_combine_back16 = time_ms([&] {
      auto g = y16.index_select(0, tokens);
      auto gr = g * wf16.unsqueeze(1);
      auto gw = (g * rows16).sum(-1);
    });
    row("unpermute backward 16384x4096 bf16", double(T * K * H * 2 * 3), ours_combine_back16,
        torch_combine_back16, p);
  }

  // SwiGLU over 16384 x 8192 fp32.
  {
    const std::int64_t n = 16384LL * 8192;
    auto gate = torch::randn({n}, f32), up = torch::randn({n}, f32), out = torch::empty({n}, f32);
    const double ours = time_ms([&] {
      k::cuda::swiglu_forward(gate.data_ptr<float>(), up.data_ptr<float>(), out.data_ptr<float>(),
                              n, nullptr);
    });
    const double theirs = time_ms([&] { auto y = torch::silu(gate) * up; });
    row("swiglu fwd 134M fp32", double(n * 12), ours, theirs, p);
    auto gate16 = gate.to(torch::kBFloat16), up16 = up.to(torch::kBFloat16);
    auto out16 = torch::empty_like(gate16), grad16 = torch::randn_like(gate16);
    auto dgate16 = torch::empty_like(gate16), dup16 = torch::empty_like(gate16);
    const double ours16 = time_ms([&] {
      k::cuda::swiglu_forward(bf16_ptr(gate16), bf16_ptr(up16), bf16_ptr(out16), n, nullptr);
    });
    const double theirs16 = time_ms([&] { auto y = torch::silu(gate16) * up16; });
    row("swiglu fwd 134M bf16", double(n * 6), ours16, theirs16, p);
    const double ours_back16 = time_ms([&] {
      k::cuda::swiglu_backward(bf16_ptr(gate16), bf16_ptr(up16), bf16_ptr(grad16),
                               bf16_ptr(dgate16), bf16_ptr(dup16), n, nullptr);
    });
    const double theirs_back16 = time_ms([&] {  // autograd's backward of silu(gate) * up
      auto dup = grad16 * torch::silu(gate16);
      auto dgate = at::silu_backward(grad16 * up16, gate16);
    });
    row("swiglu bwd 134M bf16", double(n * 10), ours_back16, theirs_back16, p);
  }

  // RMSNorm over 16384 rows of 4096 fp32 (the residual stream the engine's norms take under
  // bf16 autocast), against the formula in torch's ops (what rms_norm_op ran on a GPU before).
  // Bytes: what each must move at least, x and y forward, x, grad_y and grad_x backward (the
  // kernels read x and grad_y a second time for the weight's gradient).
  {
    const std::int64_t rows = 16384, dim = 4096, n = rows * dim;
    auto x = torch::randn({rows, dim}, f32), w = torch::randn({dim}, f32);
    auto y = torch::empty_like(x), rstd = torch::empty({rows}, f32), g = torch::randn_like(x);
    auto dx = torch::empty_like(x), dw = torch::zeros({dim}, f32);
    auto partials = torch::empty({k::cuda::rms_norm_backward_partials(rows, dim)}, f32);
    const double ours = time_ms([&] {
      k::cuda::rms_norm_forward(x.data_ptr<float>(), w.data_ptr<float>(), 1e-6f, rows, dim,
                                y.data_ptr<float>(), rstd.data_ptr<float>(), nullptr);
    });
    const double theirs = time_ms([&] {
      auto r = torch::rsqrt(x.square().mean(-1, true) + 1e-6);
      auto out = w * (x * r);
    });
    row("rms_norm fwd 16384x4096 fp32", double(n * 8), ours, theirs, p);
    const double ours_back = time_ms([&] {
      k::cuda::rms_norm_backward(x.data_ptr<float>(), w.data_ptr<float>(), rstd.data_ptr<float>(),
                                 g.data_ptr<float>(), rows, dim, dx.data_ptr<float>(),
                                 dw.data_ptr<float>(), partials.data_ptr<float>(), nullptr);
    });
    const double theirs_back = time_ms([&] {  // rms_norm_op's backward over torch's ops
      auto r = rstd.unsqueeze(1);
      auto normed = x * r;
      auto gw = (g * normed).sum(0);
      auto gn = g * w;
      auto gx = r * (gn - x * r.square() * (gn * x).mean(-1, true));
    });
    row("rms_norm bwd 16384x4096 fp32", double(n * 12), ours_back, theirs_back, p);
  }
  // The same over bf16 rows of 64 with an fp32 weight: the ~1B bench's q (8192 tokens of 16
  // heads) under bf16 autocast, against rms_norm_op's function over torch's ops, which such rows
  // took before. Bytes: x (bf16) and y (fp32) forward; x, grad_y (fp32) and grad_x (bf16) back.
  {
    const std::int64_t rows = 8192 * 16, dim = 64, n = rows * dim;
    auto x = torch::randn({rows, dim}, f32).to(torch::kBFloat16), w = torch::randn({dim}, f32);
    auto y = torch::empty({rows, dim}, f32), rstd = torch::empty({rows}, f32);
    auto g = torch::randn({rows, dim}, f32), dx = torch::empty_like(x);
    auto dw = torch::zeros({dim}, f32);
    auto partials = torch::empty({k::cuda::rms_norm_backward_partials(rows, dim)}, f32);
    const auto* xb = reinterpret_cast<const k::bf16*>(x.data_ptr<at::BFloat16>());
    const double ours = time_ms([&] {
      k::cuda::rms_norm_forward(xb, w.data_ptr<float>(), 1e-6f, rows, dim, y.data_ptr<float>(),
                                rstd.data_ptr<float>(), nullptr);
    });
    const double theirs = time_ms([&] {
      auto x32 = x.to(torch::kFloat32);
      auto r = torch::rsqrt(x32.square().mean(-1, true) + 1e-6);
      auto out = w * (x32 * r).to(torch::kBFloat16);
    });
    row("rms_norm fwd 131072x64 bf16 rows", double(n * 6), ours, theirs, p);
    const double ours_back = time_ms([&] {
      k::cuda::rms_norm_backward(xb, w.data_ptr<float>(), rstd.data_ptr<float>(),
                                 g.data_ptr<float>(), rows, dim,
                                 reinterpret_cast<k::bf16*>(dx.data_ptr<at::BFloat16>()),
                                 dw.data_ptr<float>(), partials.data_ptr<float>(), nullptr);
    });
    const auto r = rstd.unsqueeze(1);
    const auto normed = (x.to(torch::kFloat32) * r).to(torch::kBFloat16);
    const double theirs_back = time_ms([&] {  // rms_norm_ops_function's backward
      auto gw = (g * normed).sum(0);
      auto gn = g * w;
      auto x32 = x.to(torch::kFloat32);
      auto gx = (r * (gn - x32 * r.square() * (gn * x32).mean(-1, true))).to(torch::kBFloat16);
    });
    row("rms_norm bwd 131072x64 bf16 rows", double(n * 8), ours_back, theirs_back, p);
  }

  // dy^T for the experts' wgrad (engine/ops/wgrad_operands): the ~1B bench's stacked gate and
  // up gradient, 32560 rows of 1280 bf16 from 32 experts of 768..1269 rows, each expert's
  // columns padded to a common 1280 (common_reduction), against torch's zero fill, row scatter
  // and transposing copy (what padded_by_expert ran before); and with no padding, against
  // dy.t().contiguous(). Bytes: dy read once, dy^T written once.
  {
    const std::int64_t experts = 32, cols = 1280, common = 1280;
    std::vector<std::int64_t> counts;
    std::int64_t total = 0;
    for (std::int64_t e = 0; e < experts; ++e) {
      counts.push_back(768 + (e * 397) % 512);
      total += counts.back();
    }
    const std::int64_t padded = experts * common;
    auto host_map = torch::full({padded}, -1, torch::kInt32);
    auto* m = host_map.data_ptr<std::int32_t>();
    std::int32_t r = 0;
    for (std::int64_t e = 0; e < experts; ++e)
      for (std::int64_t i = 0; i < counts[std::size_t(e)]; ++i) m[e * common + i] = r++;
    const auto map = host_map.to(torch::kCUDA);
    const auto slots =
        torch::arange(padded, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA))
            .masked_select(map >= 0);
    auto dy = torch::randn({total, cols}, f32).to(torch::kBFloat16);
    auto dy_t = torch::empty({cols, padded}, dy.options());
    k::gather_transpose_shape shape{total, cols, padded, 2};
    const double ours = time_ms([&] {
      k::cuda::gather_transpose(dy.data_ptr(), map.data_ptr<std::int32_t>(), shape, dy_t.data_ptr(),
                                nullptr);
    });
    const double theirs = time_ms([&] {
      auto t =
          torch::zeros({padded, cols}, dy.options()).index_copy_(0, slots, dy).t().contiguous();
    });
    row("dy^T padded 32560x1280 bf16", double(total * cols * 2 + padded * cols * 2), ours, theirs,
        p);
    auto plain_t = torch::empty({cols, total}, dy.options());
    const k::gather_transpose_shape plain{total, cols, total, 2};
    const double ours_plain = time_ms([&] {
      k::cuda::gather_transpose(dy.data_ptr(), nullptr, plain, plain_t.data_ptr(), nullptr);
    });
    const double theirs_plain = time_ms([&] { auto t = dy.t().contiguous(); });
    row("dy^T 32560x1280 bf16", double(total * cols * 2 * 2), ours_plain, theirs_plain, p);
  }

  // The optimizer over a flat buffer of 64M fp32 parameters with a decay mask: AdamW against
  // the same update in torch's ops (what the engine ran before, a pass per operator), and the
  // sum of squares against torch's fp64 copy, square and sum.
  {
    const std::int64_t n = 1 << 26;
    auto param = torch::randn({n}, f32), grad = torch::randn({n}, f32);
    auto m = torch::zeros({n}, f32), v = torch::zeros({n}, f32), mask = torch::ones({n}, f32);
    k::adamw_scalars s;
    s.lr = 1e-4;
    s.weight_decay = 0.1;
    const double ours = time_ms([&] {
      k::cuda::adamw_update(s, param.data_ptr<float>(), grad.data_ptr<float>(), m.data_ptr<float>(),
                            v.data_ptr<float>(), mask.data_ptr<float>(), n, nullptr);
    });
    const double theirs = time_ms([&] {  // the bias corrections as constants: timing only
      param.mul_(1 - s.lr * s.weight_decay * mask);
      m.mul_(s.beta1).add_(grad, 1 - s.beta1);
      v.mul_(s.beta2).addcmul_(grad, grad, 1 - s.beta2);
      param.addcdiv_(m, (v.sqrt() / 0.999).add_(s.eps), -s.lr);
    });
    row("adamw 64M fp32 (decay mask)", double(n * 32), ours, theirs, p);
    auto scratch =
        torch::empty({k::kSumOfSquaresScratch}, torch::dtype(torch::kFloat64).device(torch::kCUDA));
    const double ours_sq = time_ms([&] {
      k::cuda::sum_of_squares(grad.data_ptr<float>(), n, scratch.data_ptr<double>(), nullptr);
    });
    const double theirs_sq = time_ms([&] { auto t = grad.to(torch::kFloat64).square().sum(); });
    row("sum of squares 64M fp32", double(n * 4), ours_sq, theirs_sq, p);
  }

  // The grouped GEMM against one dense product of the same FLOPs, bf16: 8 experts of about
  // 4096 rows, 4096 -> 1536, and the ~1B bench's (bench/compare_train_gpu.sh) 32 experts of
  // about 1024 rows (4 x 2048 tokens, top 4), 1024 -> 640.
  struct gemm_row {
    const char* shape;
    const std::vector<std::int64_t>* rows;
    std::int64_t H, F;
    form f;
  };
  const std::vector<std::int64_t> rows8{3584, 4608, 4096, 2560, 5632, 4096, 3072, 5120};
  std::vector<std::int64_t> rows32, uneven32;
  for (int e = 0; e < 32; ++e) rows32.push_back(1024 + ((e * 37) % 9 - 4) * 64);
  // as a router spreads tokens: counts not multiples of 64, from about half to twice the mean
  for (int e = 0; e < 32; ++e) uneven32.push_back(512 + (e * 797) % 1537);
  const gemm_row gemm_rows[] = {
      {"8 x ~4096, 4096->1536", &rows8, 4096, 1536, form::forward},
      {"32 x ~1024, 1024->640", &rows32, 1024, 640, form::forward},
      // the gate's and the up projection's product as the engine runs it, stacked (FSDP's
      // layout)
      {"32 x ~1024, 1024->2x640 gate|up", &rows32, 1024, 1280, form::forward},
      {"32 x ~1024, 640->1024 dgrad", &rows32, 1024, 640, form::dgrad},
      {"32 x ~1024, 2x640->1024 dgrad gate|up", &rows32, 1024, 1280, form::dgrad},
      {"32 x ~1024, 1024->640 wgrad dy^T", &rows32, 1024, 640, form::wgrad_dy_t},
      {"32 x ~1024, 1024->640 wgrad dyT", &rows32, 1024, 640, form::wgrad_aligned},
      {"32 x ~1024 wgrad dyT common k", &rows32, 1024, 640, form::wgrad_common},
      {"32 x ~1024 wgrad dyT k to 64s", &rows32, 1024, 640, form::wgrad_padded64},
      {"32 x 512..2048, 1024->640", &uneven32, 1024, 640, form::forward},
      {"32 x 512..2048 wgrad dyT", &uneven32, 1024, 640, form::wgrad_aligned},
      {"32 x 512..2048 wgrad dyT k counted", &uneven32, 1024, 640, form::wgrad_counted_k},
      {"32 x 512..2048 wgrad dyT common k", &uneven32, 1024, 640, form::wgrad_common},
      {"32 x 512..2048 wgrad dyT k to 64s", &uneven32, 1024, 640, form::wgrad_padded64}};
  for (const auto& r : gemm_rows) grouped_gemm_row(r.shape, *r.rows, r.H, r.F, r.f, false);
  joined_qkv_row();
  // The own Hopper kernel last, each shape's dense product timed again beside it: a fault in
  // a kernel not yet proven (its watchdog stops a stuck pipeline after 10 s, and the CUDA
  // context with it) then costs no other row.
  for (const auto& r : gemm_rows) grouped_gemm_row(r.shape, *r.rows, r.H, r.F, r.f, true);
  return 0;
}

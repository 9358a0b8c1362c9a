// Tensor adapters over the optimizer kernels: see optimizer_ops.hpp.
#include "engine/ops/optimizer_ops.hpp"

#include <ATen/Parallel.h>

#include <array>
#include <cmath>
#include <map>
#include <vector>

#include "common/error.hpp"
#include "engine/ops/kernel_tensors.hpp"

namespace muster::engine::ops {
namespace {

// Elements per task when a buffer is split over threads (small buffers stay on one).
constexpr std::int64_t kOptimizerGrain = 1 << 16;

void check_flat(const torch::Tensor& t, const char* what, std::int64_t numel) {
  MUSTER_CHECK(cpu_kernel_takes(t) && t.numel() == numel, errc::internal,
               "optimizer kernel: {} must be a contiguous fp32 CPU tensor of {} "
               "elements",
               what, numel);
}

}  // namespace

void adamw_update(const kernels::adamw_scalars& s, torch::Tensor& param, const torch::Tensor& grad,
                  torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  const torch::Tensor& decay_mask) {
  const auto on_device = on_device_of(param);
  if (cuda_kernel_takes(param) && cuda_kernel_takes(grad) && cuda_kernel_takes(exp_avg) &&
      cuda_kernel_takes(exp_avg_sq) && (!decay_mask.defined() || cuda_kernel_takes(decay_mask))) {
    const auto n = param.numel();
    const std::array<const torch::Tensor*, 4> buffers{&grad, &exp_avg, &exp_avg_sq, &decay_mask};
    for (const auto* t : buffers)
      MUSTER_CHECK(!t->defined() || (t->numel() == n && t->device() == param.device()),
                   errc::internal,
                   "optimizer kernel: a buffer of {} elements on {} beside the parameters' {} on "
                   "{}",
                   t->numel(), t->device().str(), n, param.device().str());
#ifdef MUSTER_WITH_CUDA
    kernels::cuda::adamw_update(s, param.data_ptr<float>(), grad.data_ptr<float>(),
                                exp_avg.data_ptr<float>(), exp_avg_sq.data_ptr<float>(),
                                decay_mask.defined() ? decay_mask.data_ptr<float>() : nullptr, n,
                                kernel_stream(param));
#endif
    return;
  }
  if (param.is_cuda()) {  // torch's ops, as torch.optim.AdamW computes it (a pass each)
    const double bias1 = 1 - std::pow(s.beta1, double(s.step));
    const double bias2 = 1 - std::pow(s.beta2, double(s.step));
    if (s.weight_decay != 0 && decay_mask.defined())  // no mask: no decay, as the kernel
      param.mul_(1 - s.lr * s.weight_decay * decay_mask);
    exp_avg.mul_(s.beta1).add_(grad, 1 - s.beta1);
    exp_avg_sq.mul_(s.beta2).addcmul_(grad, grad, 1 - s.beta2);
    const auto denom = (exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(s.eps);
    param.addcdiv_(exp_avg, denom, -s.lr / bias1);
    return;
  }
  const auto n = param.numel();
  check_flat(param, "param", n);
  check_flat(grad, "grad", n);
  check_flat(exp_avg, "exp_avg", n);
  check_flat(exp_avg_sq, "exp_avg_sq", n);
  if (decay_mask.defined()) check_flat(decay_mask, "decay_mask", n);
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const float* mask = decay_mask.defined() ? decay_mask.data_ptr<float>() : nullptr;
  at::parallel_for(0, n, kOptimizerGrain, [&](std::int64_t begin, std::int64_t end) {
    kernels::cpu::adamw_update(s, p + begin, g + begin, m + begin, v + begin,
                               mask ? mask + begin : nullptr, end - begin);
  });
}

namespace {

double cpu_sum_of_squares(const torch::Tensor& x) {
  check_flat(x, "x", x.numel());
  const float* data = x.data_ptr<float>();
  // Chunks of a fixed size summed in order: the same bits whatever the number of threads.
  const auto n = x.numel(), chunks = (n + kOptimizerGrain - 1) / kOptimizerGrain;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
  at::parallel_for(0, chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (auto c = begin; c < end; ++c)
      partial[static_cast<std::size_t>(c)] = kernels::cpu::sum_of_squares(
          data + c * kOptimizerGrain, std::min(kOptimizerGrain, n - c * kOptimizerGrain));
  });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace

std::vector<double> sums_of_squares(const std::vector<torch::Tensor>& xs) {
  std::vector<double> sums(xs.size(), 0.0);
  // The CUDA tensors' sums stay on their device until one copy a device brings them back.
  struct device_part {
    std::vector<std::size_t> of;      // the index in xs of each sum
    std::vector<torch::Tensor> sums;  // each a 1-element fp64 tensor on the device
    torch::Tensor scratch;            // kSumOfSquaresScratch doubles a tensor the kernel takes
    std::int64_t scratch_used = 0;
  };
  std::map<c10::DeviceIndex, device_part> parts;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto& x = xs[i];
    if (!x.is_cuda()) {
      sums[i] = cpu_sum_of_squares(x);
      continue;
    }
    auto& part = parts[x.device().index()];
    part.of.push_back(i);
    if (cuda_kernel_takes(x)) {
#ifdef MUSTER_WITH_CUDA
      const auto guard = on_device_of(x);
      if (!part.scratch.defined()) {
        std::int64_t kernel_tensors = 0;
        for (const auto& t : xs)
          kernel_tensors += t.device() == x.device() && cuda_kernel_takes(t) ? 1 : 0;
        part.scratch = torch::empty({kernel_tensors, kernels::kSumOfSquaresScratch},
                                    x.options().dtype(torch::kFloat64));
      }
      auto mine = part.scratch[part.scratch_used++];
      kernels::cuda::sum_of_squares(x.data_ptr<float>(), x.numel(), mine.data_ptr<double>(),
                                    kernel_stream(x));
      part.sums.push_back(mine.narrow(0, kernels::kSumOfSquaresScratch - 1, 1));
      continue;
#endif
    }
    part.sums.push_back(x.to(torch::kFloat64).square().sum().reshape({1}));
  }
  for (const auto& [device, part] : parts) {
    const auto back = torch::cat(part.sums).cpu();
    const auto* values = back.data_ptr<double>();
    for (std::size_t j = 0; j < part.of.size(); ++j) sums[part.of[j]] = values[j];
  }
  return sums;
}

}  // namespace muster::engine::ops

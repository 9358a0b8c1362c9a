// Measuring the matmul peak: see device_peak.hpp.
#include "engine/train/device_peak.hpp"

#include <algorithm>
#include <chrono>

#include <torch/cuda.h>

namespace muster::engine::train {

double measured_matmul_tflops(torch::Dtype dtype, torch::Device device) {
  torch::NoGradGuard no_grad;
  const std::int64_t n = device.is_cuda() ? 8192 : 768;  // a GPU needs a large one to be busy
  auto a = torch::randn({n, n}).to(device, dtype), b = torch::randn({n, n}).to(device, dtype);
  auto c = torch::mm(a, b);  // warm-up: thread pool, packing buffers, cuBLAS's handle
  if (device.is_cuda()) torch::cuda::synchronize();
  double best = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (int i = 0; i < 3 || std::chrono::steady_clock::now() < until; ++i) {
    const auto start = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    if (device.is_cuda()) torch::cuda::synchronize();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / std::max(s, 1e-9));
    if (i > 50) break;
  }
  return best / 1e12;
}

}  // namespace muster::engine::train

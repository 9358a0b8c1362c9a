// RMSNorm on the CPU: see include/muster/kernels/rms_norm.hpp.
#include "muster/kernels/rms_norm.hpp"

#include <cmath>
#include <vector>

#include "lane_sums.hpp"
#include "vector_targets.hpp"

namespace muster::kernels::cpu {
MUSTER_VECTOR_CLONES void rms_norm_forward(const float* __restrict x, const float* __restrict w,
                                           float eps, std::int64_t rows, std::int64_t dim,
                                           float* __restrict y, float* __restrict rstd) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float s = 1.0f / std::sqrt(dot_lanes(xr, xr, dim) / float(dim) + eps);
    rstd[r] = s;
    for (std::int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * s);
  }
}

MUSTER_VECTOR_CLONES void rms_norm_backward(const float* __restrict x, const float* __restrict w,
                                            const float* __restrict rstd,
                                            const float* __restrict grad_y, std::int64_t rows,
                                            std::int64_t dim, float* __restrict grad_x,
                                            float* __restrict grad_w) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* gr = grad_y + r * dim;
    float* dxr = grad_x + r * dim;
    const float s = rstd[r];
    // mean(gw * xh) = s * sum(g * w * x) / dim
    float lane[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= dim; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lane[j] += gr[i + j] * w[i + j] * xr[i + j];
    for (int j = 0; i < dim; ++i, ++j) lane[j] += gr[i] * w[i] * xr[i];
    float sum = 0;
    for (float l : lane) sum += l;
    const float mean = s * sum / float(dim);
    for (std::int64_t k = 0; k < dim; ++k) {
      const float xh = xr[k] * s;
      dxr[k] = s * (gr[k] * w[k] - xh * mean);
      grad_w[k] += gr[k] * xh;
    }
  }
}

void rms_norm_forward(const bf16* x, const float* w, float eps, std::int64_t rows, std::int64_t dim,
                      float* y, float* rstd) {
  std::vector<float> row(static_cast<std::size_t>(dim));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < dim; ++i) row[std::size_t(i)] = to_float(x[r * dim + i]);
    const float s = 1.0f / std::sqrt(dot_lanes(row.data(), row.data(), dim) / float(dim) + eps);
    rstd[r] = s;
    float* yr = y + r * dim;
    for (std::int64_t i = 0; i < dim; ++i)
      yr[i] = w[i] * to_float(to_bf16(row[std::size_t(i)] * s));
  }
}

void rms_norm_backward(const bf16* x, const float* w, const float* rstd, const float* grad_y,
                       std::int64_t rows, std::int64_t dim, bf16* grad_x, float* grad_w) {
  std::vector<float> row(static_cast<std::size_t>(dim)), gw(static_cast<std::size_t>(dim));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gr = grad_y + r * dim;
    for (std::int64_t i = 0; i < dim; ++i) {
      row[std::size_t(i)] = to_float(x[r * dim + i]);
      gw[std::size_t(i)] = gr[i] * w[i];
    }
    const float s = rstd[r];
    const float mean = s * dot_lanes(gw.data(), row.data(), dim) / float(dim);
    for (std::int64_t k = 0; k < dim; ++k) {
      const float xh = row[std::size_t(k)] * s;
      grad_x[r * dim + k] = to_bf16(s * (gw[std::size_t(k)] - xh * mean));
      grad_w[k] += gr[k] * to_float(to_bf16(xh));
    }
  }
}

}  // namespace muster::kernels::cpu

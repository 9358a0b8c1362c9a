// SwiGLU on the CPU: see include/muster/kernels/swiglu.hpp.
// The loops vectorize: exp is our own (exp_approx.hpp), not libm's.
#include "muster/kernels/swiglu.hpp"

#include "bf16_lanes.hpp"
#include "exp_approx.hpp"
#include "vector_targets.hpp"

#include <cmath>
#include <cstdint>

namespace muster::kernels::cpu {
namespace {

// 1 / (1 + e^-x), from e = e^-|x| (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e) below.
inline float sigmoid(float x) {
  const float e = exp_approx(-std::abs(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

}  // namespace

MUSTER_VECTOR_CLONES void swiglu_forward(const float* __restrict gate, const float* __restrict up,
                    float* __restrict out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = gate[i];
    out[i] = a * sigmoid(a) * up[i];
  }
}

MUSTER_VECTOR_CLONES void swiglu_backward(const float* __restrict gate, const float* __restrict up,
                     const float* __restrict grad_out, float* __restrict grad_gate,
                     float* __restrict grad_up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = gate[i], g = grad_out[i];
    const float s = sigmoid(a);
    grad_up[i] = g * (a * s);
    grad_gate[i] = g * up[i] * (s * (1.0f + a * (1.0f - s)));
  }
}

// GCC 12 takes the chunk arrays, filled by widen() before they are read, for uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void swiglu_forward(const bf16* gate, const bf16* up, bf16* out, std::int64_t n) {
  for_each_chunk(n, [&](std::int64_t at, std::int64_t m) {
    float a[kBf16Chunk], b[kBf16Chunk], y[kBf16Chunk];
    widen(gate + at, a, m);
    widen(up + at, b, m);
    swiglu_forward(a, b, y, m);
    narrow(y, out + at, m);
  });
}

void swiglu_backward(const bf16* gate, const bf16* up, const bf16* grad_out, bf16* grad_gate,
                     bf16* grad_up, std::int64_t n) {
  for_each_chunk(n, [&](std::int64_t at, std::int64_t m) {
    float a[kBf16Chunk], b[kBf16Chunk], g[kBf16Chunk], da[kBf16Chunk], db[kBf16Chunk];
    widen(gate + at, a, m);
    widen(up + at, b, m);
    widen(grad_out + at, g, m);
    swiglu_backward(a, b, g, da, db, m);
    narrow(da, grad_gate + at, m);
    narrow(db, grad_up + at, m);
  });
}
#pragma GCC diagnostic pop

namespace {

// Each row of packed gate | up through the elementwise functions above.
template <class T>
void rows_forward(const T* gate_up, T* out, std::int64_t rows, std::int64_t width) {
  for (std::int64_t r = 0; r < rows; ++r)
    swiglu_forward(gate_up + r * 2 * width, gate_up + r * 2 * width + width, out + r * width,
                   width);
}

template <class T>
void rows_backward(const T* gate_up, const T* grad_out, T* grad_gate_up, std::int64_t rows,
                   std::int64_t width) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = gate_up + r * 2 * width;
    T* grad_row = grad_gate_up + r * 2 * width;
    swiglu_backward(row, row + width, grad_out + r * width, grad_row, grad_row + width, width);
  }
}

}  // namespace

void swiglu_rows_forward(const float* gate_up, float* out, std::int64_t rows, std::int64_t width) {
  rows_forward(gate_up, out, rows, width);
}

void swiglu_rows_backward(const float* gate_up, const float* grad_out, float* grad_gate_up,
                          std::int64_t rows, std::int64_t width) {
  rows_backward(gate_up, grad_out, grad_gate_up, rows, width);
}

void swiglu_rows_forward(const bf16* gate_up, bf16* out, std::int64_t rows, std::int64_t width) {
  rows_forward(gate_up, out, rows, width);
}

void swiglu_rows_backward(const bf16* gate_up, const bf16* grad_out, bf16* grad_gate_up,
                          std::int64_t rows, std::int64_t width) {
  rows_backward(gate_up, grad_out, grad_gate_up, rows, width);
}

}  // namespace muster::kernels::cpu

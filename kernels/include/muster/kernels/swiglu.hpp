// The SwiGLU activation of a gated MLP, out = silu(gate) * up with silu(x) = x * sigmoid(x),
// and its backward, elementwise in one pass (torch's ops take one pass and a temporary each:
// silu, the product, and three in the backward). Raw pointers and counts; no CUDA or torch
// types. The cpu:: functions work on any range, so a caller may split a buffer over threads;
// the cuda:: ones take the whole buffer. The bf16 overloads read and write bf16 and compute in
// fp32, rounding each result once.
#pragma once

#include <cstdint>

#include "muster/kernels/bf16.hpp"

namespace muster::kernels::cpu {

// out[i] = silu(gate[i]) * up[i], i < n (fp32; exp to about 2 ulp).
void swiglu_forward(const float* gate, const float* up, float* out, std::int64_t n);

// Given grad_out = dL/dout: grad_gate = grad_out * up * silu'(gate), grad_up = grad_out *
// silu(gate), where silu'(x) = s * (1 + x * (1 - s)) and s = sigmoid(x).
void swiglu_backward(const float* gate, const float* up, const float* grad_out, float* grad_gate,
                     float* grad_up, std::int64_t n);

void swiglu_forward(const bf16* gate, const bf16* up, bf16* out, std::int64_t n);
void swiglu_backward(const bf16* gate, const bf16* up, const bf16* grad_out, bf16* grad_gate,
                     bf16* grad_up, std::int64_t n);

// The same over packed rows: gate_up is (rows, 2 width), each row its gate then its up (what one
// product with the gate's and the up projection's weights stacked gives), out (rows, width),
// grad_gate_up (rows, 2 width) laid out as gate_up.
void swiglu_rows_forward(const float* gate_up, float* out, std::int64_t rows, std::int64_t width);
void swiglu_rows_backward(const float* gate_up, const float* grad_out, float* grad_gate_up,
                          std::int64_t rows, std::int64_t width);
void swiglu_rows_forward(const bf16* gate_up, bf16* out, std::int64_t rows, std::int64_t width);
void swiglu_rows_backward(const bf16* gate_up, const bf16* grad_out, bf16* grad_gate_up,
                          std::int64_t rows, std::int64_t width);

}  // namespace muster::kernels::cpu

namespace muster::kernels::cuda {

// The same on the GPU: device pointers, enqueued on `stream` (a cudaStream_t; nullptr: the
// default stream). Built only with CUDA; see kernels/cuda/swiglu.cu.
void swiglu_forward(const float* gate, const float* up, float* out, std::int64_t n, void* stream);
void swiglu_backward(const float* gate, const float* up, const float* grad_out, float* grad_gate,
                     float* grad_up, std::int64_t n, void* stream);
void swiglu_forward(const bf16* gate, const bf16* up, bf16* out, std::int64_t n, void* stream);
void swiglu_backward(const bf16* gate, const bf16* up, const bf16* grad_out, bf16* grad_gate,
                     bf16* grad_up, std::int64_t n, void* stream);
void swiglu_rows_forward(const float* gate_up, float* out, std::int64_t rows, std::int64_t width,
                         void* stream);
void swiglu_rows_backward(const float* gate_up, const float* grad_out, float* grad_gate_up,
                          std::int64_t rows, std::int64_t width, void* stream);
void swiglu_rows_forward(const bf16* gate_up, bf16* out, std::int64_t rows, std::int64_t width,
                         void* stream);
void swiglu_rows_backward(const bf16* gate_up, const bf16* grad_out, bf16* grad_gate_up,
                          std::int64_t rows, std::int64_t width, void* stream);

}  // namespace muster::kernels::cuda

// bf16 <-> fp32 over short arrays, for the CPU kernels' bf16 overloads: they widen a chunk of
// kBf16Chunk elements into fp32 on the stack, run the fp32 loop on it and narrow the result,
// so the fp32 loops (and their vector clones) serve both types. Written as integer loops that
// vectorize; C++20 (CPU only); the rounding is muster/kernels/bf16.hpp's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <bit>

#include "muster/kernels/bf16.hpp"

namespace muster::kernels::cpu {

inline constexpr std::int64_t kBf16Chunk = 512;

inline void widen(const bf16* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = std::bit_cast<float>(std::uint32_t(in[i].bits) << 16);
}

inline void narrow(const float* in, bf16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

// Calls body(begin, count) over [0, n) in chunks of at most kBf16Chunk.
template <class Body>
void for_each_chunk(std::int64_t n, Body&& body) {
  for (std::int64_t begin = 0; begin < n; begin += kBf16Chunk)
    body(begin, std::min(kBf16Chunk, n - begin));
}

}  // namespace muster::kernels::cpu

// MUSTER_VECTOR_CLONES: compiles a loop kernel twice, for AVX2 (8 floats a vector) and for
// x86-64's baseline (SSE2, 4); the loader picks the one the CPU runs (GCC's target_clones).
// Elsewhere (another architecture or compiler) a plain function.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MUSTER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MUSTER_VECTOR_CLONES
#endif

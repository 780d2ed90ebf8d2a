#include "engine/cpu/cpu_fma_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#if FUSERANK_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace fuserank::engine {
namespace {

constexpr int kAccumulators = 12;

// x <- x * m + a converges to a / (1 - m): no overflow, no denormals, and the compiler
// cannot fold the chain away. A macro, not a template: the FMA must be compiled in the
// function that carries the target attribute.
#define FUSERANK_FMA_LOOP(V, FMA, m, a, one)                                                       \
  /* distinct starting points, or the compiler merges the identical chains */                      \
  V x0 = one, x1 = one * 2.0f, x2 = one * 3.0f, x3 = one * 4.0f, x4 = one * 5.0f, x5 = one * 6.0f, \
    x6 = one * 7.0f, x7 = one * 8.0f, x8 = one * 9.0f, x9 = one * 10.0f, x10 = one * 11.0f,        \
    x11 = one * 12.0f;                                                                             \
  for (int64_t i = 0; i < iterations; ++i) {                                                       \
    x0 = FMA(x0, m, a);                                                                            \
    x1 = FMA(x1, m, a);                                                                            \
    x2 = FMA(x2, m, a);                                                                            \
    x3 = FMA(x3, m, a);                                                                            \
    x4 = FMA(x4, m, a);                                                                            \
    x5 = FMA(x5, m, a);                                                                            \
    x6 = FMA(x6, m, a);                                                                            \
    x7 = FMA(x7, m, a);                                                                            \
    x8 = FMA(x8, m, a);                                                                            \
    x9 = FMA(x9, m, a);                                                                            \
    x10 = FMA(x10, m, a);                                                                          \
    x11 = FMA(x11, m, a);                                                                          \
  }                                                                                                \
  const V sum = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) + ((x8 + x9) + (x10 + x11));     \
  float first;                                                                                     \
  std::memcpy(&first, &sum, sizeof(first));                                                        \
  return first

using V4 = float __attribute__((vector_size(16)));
#define FUSERANK_MUL_ADD(x, y, z) ((x) * (y) + (z))

float LoopGeneric(int64_t iterations) {
  const V4 m = {0.999f, 0.999f, 0.999f, 0.999f}, a = {1e-3f, 1e-3f, 1e-3f, 1e-3f};
  const V4 one = {1, 1, 1, 1};
  FUSERANK_FMA_LOOP(V4, FUSERANK_MUL_ADD, m, a, one);
}

#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 float LoopAvx2(int64_t iterations) {
  const __m256 m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(1e-3f), one = _mm256_set1_ps(1.0f);
  FUSERANK_FMA_LOOP(__m256, _mm256_fmadd_ps, m, a, one);
}

FUSERANK_TARGET_AVX512 float LoopAvx512(int64_t iterations) {
  const __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(1e-3f), one = _mm512_set1_ps(1.0f);
  FUSERANK_FMA_LOOP(__m512, _mm512_fmadd_ps, m, a, one);
}
#endif

#undef FUSERANK_MUL_ADD
#undef FUSERANK_FMA_LOOP

}  // namespace

int FmaLoopFlopsPerIteration(CpuIsa isa) {
  const int lanes = isa == CpuIsa::kAvx512 ? 16 : isa == CpuIsa::kAvx2 ? 8 : 4;
  return kAccumulators * lanes * 2;
}

float FmaLoop(CpuIsa isa, int64_t iterations) {
#if FUSERANK_HAVE_AVX2_PATH
  if (isa == CpuIsa::kAvx512) return LoopAvx512(iterations);
  if (isa == CpuIsa::kAvx2) return LoopAvx2(iterations);
#endif
  return LoopGeneric(iterations);
}

double MeasureFmaGflops(CpuIsa isa, int64_t iterations, int rounds) {
  using Clock = std::chrono::steady_clock;
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point start = Clock::now();
    sink = sink + FmaLoop(isa, iterations);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0) {
      best = std::max(
          best, static_cast<double>(iterations) * FmaLoopFlopsPerIteration(isa) / seconds * 1e-9);
    }
  }
  return best;
}

}  // namespace fuserank::engine

// The CPU engine's rule for non-finite values, one value or one vector at a time, for the
// kernels that apply it as they store (the sgemm epilogues) and for SaturateNonFinite
// (cpu_mlp.h), which applies it to rows already in memory: +-Inf becomes +-FLT_MAX, NaN
// becomes 0, every finite value (signed zeros included) passes bit for bit. The three
// forms give the same bits.
#ifndef FUSERANK_ENGINE_CPU_CPU_SATURATE_H_
#define FUSERANK_ENGINE_CPU_CPU_SATURATE_H_

#include <cfloat>

#include "engine/cpu/cpu_simd.h"

#if FUSERANK_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace fuserank::engine {

// Branch-free, so that a loop of it vectorizes; v != v only for NaN.
FUSERANK_INLINE float SaturateFinite(float v) {
  const float clamped = v > FLT_MAX ? FLT_MAX : (v < -FLT_MAX ? -FLT_MAX : v);
  return v != v ? 0.0f : clamped;
}

#if FUSERANK_HAVE_AVX512_PATH
FUSERANK_TARGET_AVX512 FUSERANK_INLINE __m512 SaturateFinite(__m512 v) {
  // max and min return their second operand when one is NaN: the clamp turns NaN into
  // -FLT_MAX, and the ordered-compare mask then zeroes those lanes. The masked forms:
  // GCC 12 warns about the _mm512_undefined_ps() in the plain ones.
  const __m512 clamped = _mm512_maskz_min_ps(
      0xFFFF, _mm512_maskz_max_ps(0xFFFF, v, _mm512_set1_ps(-FLT_MAX)), _mm512_set1_ps(FLT_MAX));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), clamped);
}
#endif

#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 FUSERANK_INLINE __m256 SaturateFinite(__m256 v) {
  const __m256 clamped =
      _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-FLT_MAX)), _mm256_set1_ps(FLT_MAX));
  return _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_ORD_Q), clamped);
}
#endif

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_SATURATE_H_

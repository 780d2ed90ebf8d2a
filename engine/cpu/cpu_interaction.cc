#include "engine/cpu/cpu_interaction.h"

#include <cstddef>
#include <vector>

#include "engine/cpu/cpu_gram_dots.h"
#include "engine/cpu/cpu_simd.h"

#if FUSERANK_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace fuserank::engine {
namespace {

constexpr int kLanes = 16;

FUSERANK_INLINE float Dot(const float* __restrict__ a, const float* __restrict__ b, int d) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  }
  for (int l = 0; j + l < d; ++l) acc[l] += a[j + l] * b[j + l];
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

// out[j] = dot(x, ys + j * d) for j in [0, n).
FUSERANK_INLINE void DotMany(const float* x, const float* ys, int n, int d, float* out) {
  for (int j = 0; j < n; ++j) out[j] = Dot(x, ys + static_cast<size_t>(j) * d, d);
}

#if FUSERANK_HAVE_AVX2_PATH
// The same with d % 8 == 0: four dots at a time, reduced together with horizontal adds.
FUSERANK_TARGET_AVX2 FUSERANK_INLINE void DotManyAvx2(const float* x, const float* ys, int n, int d,
                                                      float* out) {
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* y = ys + static_cast<size_t>(j) * d;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    for (int l = 0; l < d; l += 8) {
      const __m256 xv = _mm256_loadu_ps(x + l);
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(y + l), xv, acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(y + d + l), xv, acc1);
      acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(y + 2 * d + l), xv, acc2);
      acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(y + 3 * d + l), xv, acc3);
    }
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(acc0, acc1), _mm256_hadd_ps(acc2, acc3));
    _mm_storeu_ps(out + j, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  for (; j < n; ++j) {
    const float* y = ys + static_cast<size_t>(j) * d;
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < d; l += 8) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(y + l), _mm256_loadu_ps(x + l), acc);
    }
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
    out[j] = _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
  }
}
#endif

template <typename Many>
FUSERANK_INLINE void GramRows(const GramArgs& args, Many many) {
  for (int c = 0; c < args.rows; ++c) {
    const float* own = args.own + static_cast<size_t>(c) * args.own_stride;
    float* out = args.out + static_cast<size_t>(c) * args.out_stride;
    for (int o = 0; o < args.num_own; ++o) {
      const float* x = own + static_cast<size_t>(o) * args.d;
      many(x, args.shared, args.num_shared, args.d, out);
      out += args.num_shared;
      many(x, own, o, args.d, out);
      out += o;
    }
  }
}

void GramRowsGeneric(const GramArgs& args) { GramRows(args, DotMany); }

#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 void GramRowsAvx2(const GramArgs& args) { GramRows(args, DotManyAvx2); }
#endif

struct TermsArgs {
  const DotTerm* terms;
  int num_terms;
  int d;
  int rows;
  const float* const* sources;
  const int* strides;
  float* out;
  int out_stride;
};

FUSERANK_INLINE void RunTerms(const TermsArgs& args) {
  for (int c = 0; c < args.rows; ++c) {
    float* out = args.out + static_cast<size_t>(c) * args.out_stride;
    for (int t = 0; t < args.num_terms; ++t) {
      const DotTerm& term = args.terms[t];
      const float* a = args.sources[term.a_source] +
                       static_cast<size_t>(c) * args.strides[term.a_source] + term.a_offset;
      const float* b = args.sources[term.b_source] +
                       static_cast<size_t>(c) * args.strides[term.b_source] + term.b_offset;
      out[t] = Dot(a, b, args.d);
    }
  }
}

void RunTermsGeneric(const TermsArgs& args) { RunTerms(args); }

#if FUSERANK_HAVE_AVX2_PATH
FUSERANK_TARGET_AVX2 void RunTermsAvx2(const TermsArgs& args) { RunTerms(args); }
#endif

}  // namespace

size_t DotGramScratchFloats(int num_shared, int num_own, int d) {
  return GramMatrixFloats(num_shared, num_own, d);
}

void DotGramRows(const float* shared, int num_shared, const float* own, int num_own, int own_stride,
                 int d, int rows, float* out, int out_stride, std::vector<float>* scratch) {
  if (rows <= 0 || num_own <= 0) return;
  const GramArgs args{shared, num_shared, own, num_own, own_stride, d, rows, out, out_stride};
  if (d <= 0) {  // zeros (no model has such vectors: table dims are >= 1)
    GramRowsGeneric(args);
    return;
  }
  const auto matrix = [&] {
    const size_t floats = GramMatrixFloats(num_shared, num_own, d);
    if (scratch->size() < floats) scratch->resize(floats);
    return scratch->data();
  };
#if FUSERANK_HAVE_AVX512_PATH
  if (ActiveCpuIsa() >= CpuIsa::kAvx512) {
    GramRowsMatrixAvx512(args, matrix());
    return;
  }
#endif
#if FUSERANK_HAVE_AVX2_PATH
  if (CpuHasAvx2Fma()) {
    if (Avx2TakesMatrixProduct(d)) {
      GramRowsMatrixAvx2(args, matrix());
    } else {
      GramRowsAvx2(args);
    }
    return;
  }
#endif
  GramRowsGeneric(args);
}

void DotInteraction(const float* v, int rows, int n, int d, int v_stride, float* out,
                    int out_stride) {
  std::vector<float> scratch;
  DotGramRows(nullptr, 0, v, n, v_stride, d, rows, out, out_stride, &scratch);
}

void DotTerms(const DotTerm* terms, int num_terms, int d, int rows, const float* const* sources,
              const int* strides, float* out, int out_stride) {
  if (rows <= 0 || num_terms <= 0) return;
  const TermsArgs args{terms, num_terms, d, rows, sources, strides, out, out_stride};
#if FUSERANK_HAVE_AVX2_PATH
  if (CpuHasAvx2Fma()) {
    RunTermsAvx2(args);
    return;
  }
#endif
  RunTermsGeneric(args);
}

}  // namespace fuserank::engine

#include "engine/cpu_interaction.h"

#include <cstddef>

#include "engine/cpu_simd.h"

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

void DotInteraction(const float* v, int rows, int n, int d, int v_stride, float* out,
                    int out_stride) {
  for (int c = 0; c < rows; ++c) {
    const float* row = v + static_cast<size_t>(c) * v_stride;
    float* dst = out + static_cast<size_t>(c) * out_stride;
    int p = 0;
    for (int i = 1; i < n; ++i) {
      for (int j = 0; j < i; ++j) {
        const DotTerm term{0, i * d, 0, j * d};
        const float* sources[1] = {row};
        const int strides[1] = {0};
        DotTerms(&term, 1, d, 1, sources, strides, dst + p, 1);
        ++p;
      }
    }
  }
}

}  // namespace fuserank::engine

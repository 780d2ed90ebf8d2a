#include "engine/cpu/sgemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "engine/cpu/cpu_saturate.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm_internal.h"

#if FUSERANK_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace fuserank::engine {

PackedMatrix PackedMatrix::FromTransposed(const float* w, int n, int k, int ldw,
                                          const int* columns) {
  PackedMatrix packed;
  packed.k_ = k;
  packed.n_ = n;
  const size_t floats = static_cast<size_t>(packed.panels()) * k * kSgemmPanel;
  const size_t bytes = std::max<size_t>(64, (floats * sizeof(float) + 63) / 64 * 64);
  packed.data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  std::memset(packed.data_.get(), 0, bytes);
  if (n == 1) {
    packed.column_.resize(k);
    for (int p = 0; p < k; ++p) packed.column_[p] = w[columns != nullptr ? columns[p] : p];
  }
  for (int j = 0; j < n; ++j) {
    float* dst = packed.data_.get() + static_cast<size_t>(j / kSgemmPanel) * k * kSgemmPanel +
                 j % kSgemmPanel;
    const float* row = w + static_cast<size_t>(j) * ldw;
    for (int p = 0; p < k; ++p) {
      dst[static_cast<size_t>(p) * kSgemmPanel] = row[columns != nullptr ? columns[p] : p];
    }
  }
  return packed;
}

namespace {

using sgemm_internal::Epi;
using sgemm_internal::Shift;
using sgemm_internal::X0;
using sgemm_internal::XL;

// Four floats as a GCC/Clang vector: SSE on baseline x86, NEON on ARM.
using V4 = float __attribute__((vector_size(16)));

FUSERANK_INLINE V4 LoadV4(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

FUSERANK_INLINE void StoreRowGeneric(float* out, const V4 (&acc)[4], bool relu, int ncols,
                                     const float* x0, const float* xl) {
  alignas(16) float tmp[kSgemmPanel];
  std::memcpy(tmp, acc, sizeof(tmp));
  if (x0 != nullptr) {
    for (int l = 0; l < ncols; ++l) out[l] = SaturateFinite(x0[l] * tmp[l] + xl[l]);
    return;
  }
  for (int l = 0; l < ncols; ++l) out[l] = SaturateFinite(relu ? std::max(tmp[l], 0.0f) : tmp[l]);
}

// The micro-kernel's contract, both ISAs: rows [0, MR) of A (MR <= 2 here) times one
// 16-column panel, plus bias16, ReLU when asked, `ncols` (<= 16) columns stored.
template <int MR>
void KernelGeneric(int k, const float* a, int lda, const float* panel, const float* bias16,
                   bool relu, float* c, int ldc, int ncols, const Epi* e) {
  const V4 bias[4] = {LoadV4(bias16), LoadV4(bias16 + 4), LoadV4(bias16 + 8), LoadV4(bias16 + 12)};
  V4 r0[4] = {bias[0], bias[1], bias[2], bias[3]};
  V4 r1[4] = {bias[0], bias[1], bias[2], bias[3]};
  const float* a1 = a + (MR > 1 ? lda : 0);
  for (int p = 0; p < k; ++p) {
    const float* b = panel + static_cast<size_t>(p) * kSgemmPanel;
    const V4 b0 = LoadV4(b), b1 = LoadV4(b + 4), b2 = LoadV4(b + 8), b3 = LoadV4(b + 12);
    const float x0 = a[p];
    r0[0] += x0 * b0;
    r0[1] += x0 * b1;
    r0[2] += x0 * b2;
    r0[3] += x0 * b3;
    if constexpr (MR > 1) {
      const float x1 = a1[p];
      r1[0] += x1 * b0;
      r1[1] += x1 * b1;
      r1[2] += x1 * b2;
      r1[3] += x1 * b3;
    }
  }
  StoreRowGeneric(c, r0, relu, ncols, X0(e, 0, 0), XL(e, 0, 0));
  if constexpr (MR > 1) StoreRowGeneric(c + ldc, r1, relu, ncols, X0(e, 1, 0), XL(e, 1, 0));
}

// Panels [first, last) of C = A * B; bias16s holds 16 padded floats per panel from `first`.
void SgemmGeneric(int m, const float* a, int lda, const PackedMatrix& b, int first, int last,
                  const float* bias16s, bool relu, float* c, int ldc, const Epi* e) {
  constexpr int kRows = 2;
  for (int j = first; j < last; ++j) {
    const int ncols = std::min(kSgemmPanel, b.n() - j * kSgemmPanel);
    const float* bias16 = bias16s + (j - first) * kSgemmPanel;
    float* cj = c + j * kSgemmPanel;
    int i = 0;
    Epi block;
    auto at = [&](int row) {
      return e != nullptr ? &(block = Shift(*e, row, j * kSgemmPanel)) : e;
    };
    for (; i + kRows <= m; i += kRows) {
      KernelGeneric<kRows>(b.k(), a + static_cast<size_t>(i) * lda, lda, b.panel(j), bias16, relu,
                           cj + static_cast<size_t>(i) * ldc, ldc, ncols, at(i));
    }
    for (; i < m; ++i) {
      KernelGeneric<1>(b.k(), a + static_cast<size_t>(i) * lda, lda, b.panel(j), bias16, relu,
                       cj + static_cast<size_t>(i) * ldc, ldc, ncols, at(i));
    }
  }
}

#if FUSERANK_HAVE_AVX2_PATH

FUSERANK_TARGET_AVX2 FUSERANK_INLINE void StoreRowAvx2(float* out, __m256 lo, __m256 hi, bool relu,
                                                       int ncols, const float* x0,
                                                       const float* xl) {
  if (x0 != nullptr) {
    if (ncols == kSgemmPanel) {
      lo = _mm256_fmadd_ps(_mm256_loadu_ps(x0), lo, _mm256_loadu_ps(xl));
      hi = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + 8), hi, _mm256_loadu_ps(xl + 8));
      _mm256_storeu_ps(out, SaturateFinite(lo));
      _mm256_storeu_ps(out + 8, SaturateFinite(hi));
    } else {
      alignas(32) float tmp[kSgemmPanel];
      _mm256_store_ps(tmp, lo);
      _mm256_store_ps(tmp + 8, hi);
      for (int l = 0; l < ncols; ++l) out[l] = SaturateFinite(x0[l] * tmp[l] + xl[l]);
    }
    return;
  }
  if (relu) {
    lo = _mm256_max_ps(lo, _mm256_setzero_ps());
    hi = _mm256_max_ps(hi, _mm256_setzero_ps());
  }
  lo = SaturateFinite(lo);
  hi = SaturateFinite(hi);
  if (ncols == kSgemmPanel) {
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
  } else {
    alignas(32) float tmp[kSgemmPanel];
    _mm256_store_ps(tmp, lo);
    _mm256_store_ps(tmp + 8, hi);
    std::memcpy(out, tmp, sizeof(float) * ncols);
  }
}

// Accumulators are named registers, not an array: GCC keeps arrays of vectors indexed
// by loop counters on the stack.
template <int MR>
FUSERANK_TARGET_AVX2 void KernelAvx2(int k, const float* a, int lda, const float* panel,
                                     const float* bias16, bool relu, float* c, int ldc, int ncols,
                                     const Epi* e) {
  const __m256 bias_lo = _mm256_loadu_ps(bias16);
  const __m256 bias_hi = _mm256_loadu_ps(bias16 + 8);
  __m256 c0l = bias_lo, c0h = bias_hi, c1l = bias_lo, c1h = bias_hi, c2l = bias_lo, c2h = bias_hi,
         c3l = bias_lo, c3h = bias_hi, c4l = bias_lo, c4h = bias_hi, c5l = bias_lo, c5h = bias_hi;
  const float* a0 = a;
  const float* a1 = a0 + (MR > 1 ? lda : 0);
  const float* a2 = a1 + (MR > 2 ? lda : 0);
  const float* a3 = a2 + (MR > 3 ? lda : 0);
  const float* a4 = a3 + (MR > 4 ? lda : 0);
  const float* a5 = a4 + (MR > 5 ? lda : 0);
#define FUSERANK_SGEMM_ROW(r)                        \
  if constexpr (MR > r) {                            \
    const __m256 av = _mm256_broadcast_ss(a##r + p); \
    c##r##l = _mm256_fmadd_ps(av, b_lo, c##r##l);    \
    c##r##h = _mm256_fmadd_ps(av, b_hi, c##r##h);    \
  }
#pragma GCC unroll 4
  for (int p = 0; p < k; ++p) {
    const __m256 b_lo = _mm256_load_ps(panel + static_cast<size_t>(p) * kSgemmPanel);
    const __m256 b_hi = _mm256_load_ps(panel + static_cast<size_t>(p) * kSgemmPanel + 8);
    FUSERANK_SGEMM_ROW(0)
    FUSERANK_SGEMM_ROW(1)
    FUSERANK_SGEMM_ROW(2)
    FUSERANK_SGEMM_ROW(3)
    FUSERANK_SGEMM_ROW(4)
    FUSERANK_SGEMM_ROW(5)
  }
#undef FUSERANK_SGEMM_ROW
#define FUSERANK_SGEMM_STORE(r)                                                                \
  if constexpr (MR > r) {                                                                      \
    StoreRowAvx2(c + static_cast<size_t>(r) * ldc, c##r##l, c##r##h, relu, ncols, X0(e, r, 0), \
                 XL(e, r, 0));                                                                 \
  }
  FUSERANK_SGEMM_STORE(0)
  FUSERANK_SGEMM_STORE(1)
  FUSERANK_SGEMM_STORE(2)
  FUSERANK_SGEMM_STORE(3)
  FUSERANK_SGEMM_STORE(4)
  FUSERANK_SGEMM_STORE(5)
#undef FUSERANK_SGEMM_STORE
}

FUSERANK_TARGET_AVX2 void SgemmAvx2(int m, const float* a, int lda, const PackedMatrix& b,
                                    int first, int last, const float* bias16s, bool relu, float* c,
                                    int ldc, const Epi* e) {
  constexpr int kRows = 6;
  for (int j = first; j < last; ++j) {
    const int ncols = std::min(kSgemmPanel, b.n() - j * kSgemmPanel);
    const float* bias16 = bias16s + (j - first) * kSgemmPanel;
    const float* panel = b.panel(j);
    float* cj = c + j * kSgemmPanel;
    int i = 0;
    Epi block;
    auto at = [&](int row) {
      return e != nullptr ? &(block = Shift(*e, row, j * kSgemmPanel)) : e;
    };
    for (; i + kRows <= m; i += kRows) {
      KernelAvx2<kRows>(b.k(), a + static_cast<size_t>(i) * lda, lda, panel, bias16, relu,
                        cj + static_cast<size_t>(i) * ldc, ldc, ncols, at(i));
    }
    const float* ai = a + static_cast<size_t>(i) * lda;
    float* ci = cj + static_cast<size_t>(i) * ldc;
    const Epi* ei = at(i);
    switch (m - i) {
      case 5:
        KernelAvx2<5>(b.k(), ai, lda, panel, bias16, relu, ci, ldc, ncols, ei);
        break;
      case 4:
        KernelAvx2<4>(b.k(), ai, lda, panel, bias16, relu, ci, ldc, ncols, ei);
        break;
      case 3:
        KernelAvx2<3>(b.k(), ai, lda, panel, bias16, relu, ci, ldc, ncols, ei);
        break;
      case 2:
        KernelAvx2<2>(b.k(), ai, lda, panel, bias16, relu, ci, ldc, ncols, ei);
        break;
      case 1:
        KernelAvx2<1>(b.k(), ai, lda, panel, bias16, relu, ci, ldc, ncols, ei);
        break;
      default:
        break;
    }
  }
}

#endif  // FUSERANK_HAVE_AVX2_PATH

}  // namespace

void SgemmPacked(int m, const float* a, int lda, const PackedMatrix& b, const float* bias,
                 bool relu, float* c, int ldc, const CrossEpilogue* cross) {
  if (m <= 0 || b.n() <= 0) return;
  Epi epi;
  const Epi* e = nullptr;
  if (cross != nullptr) {
    epi = {cross->x0, static_cast<size_t>(cross->ld_x0), cross->xl,
           static_cast<size_t>(cross->ld_xl)};
    e = &epi;
    relu = false;
  }
  // The kernels read 16 bias floats per panel: copy the bias, zero-padded, to the stack,
  // a chunk of panels at a time.
  constexpr int kChunkPanels = 32;
  alignas(64) float bias16s[kChunkPanels * kSgemmPanel];
  const CpuIsa isa = ActiveCpuIsa();
#if FUSERANK_HAVE_AVX512_PATH
  if (isa == CpuIsa::kAvx512 && b.column() != nullptr && e == nullptr) {
    sgemm_internal::GemvAvx512(m, b.k(), a, lda, b.column(), bias != nullptr ? bias[0] : 0.0f, relu,
                               c, ldc);
    return;
  }
#endif
  for (int first = 0; first < b.panels(); first += kChunkPanels) {
    const int last = std::min(b.panels(), first + kChunkPanels);
    const int col0 = first * kSgemmPanel;
    const int cols = std::min((last - first) * kSgemmPanel, b.n() - col0);
    std::fill(bias16s, bias16s + (last - first) * kSgemmPanel, 0.0f);
    if (bias != nullptr) std::copy(bias + col0, bias + col0 + cols, bias16s);
#if FUSERANK_HAVE_AVX512_PATH
    if (isa == CpuIsa::kAvx512) {
      sgemm_internal::SgemmAvx512(m, a, lda, b, first, last, bias16s, relu, c, ldc, e);
      continue;
    }
#endif
#if FUSERANK_HAVE_AVX2_PATH
    if (isa == CpuIsa::kAvx2) {
      SgemmAvx2(m, a, lda, b, first, last, bias16s, relu, c, ldc, e);
      continue;
    }
#endif
    SgemmGeneric(m, a, lda, b, first, last, bias16s, relu, c, ldc, e);
  }
}

}  // namespace fuserank::engine

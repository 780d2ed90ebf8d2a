#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "engine/cpu/cpu_saturate.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm_internal.h"

#if FUSERANK_HAVE_AVX512_PATH

namespace fuserank::engine::sgemm_internal {
namespace {

// Lanes [0, cols) of a 16-float row (cols may be <= 0 or > 16).
FUSERANK_TARGET_AVX512 FUSERANK_INLINE __mmask16 ColumnMask(int cols) {
  return cols >= 16 ? static_cast<__mmask16>(0xFFFF)
                    : static_cast<__mmask16>(cols <= 0 ? 0 : (1u << cols) - 1);
}

FUSERANK_TARGET_AVX512 FUSERANK_INLINE void StoreAvx512(float* out, __m512 v, bool relu,
                                                        __mmask16 mask, const float* x0,
                                                        const float* xl) {
  if (x0 != nullptr) {
    v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x0), v, _mm512_maskz_loadu_ps(mask, xl));
    _mm512_mask_storeu_ps(out, mask, SaturateFinite(v));
    return;
  }
  // The masked form: GCC 12 warns about the _mm512_undefined_ps() in _mm512_max_ps.
  if (relu) v = _mm512_maskz_max_ps(0xFFFF, v, _mm512_setzero_ps());
  _mm512_mask_storeu_ps(out, mask, SaturateFinite(v));
}

// MR rows of A times NP (1 or 2) adjacent 16-column panels: MR x 16 NP accumulators, one
// zmm each (12 x 2 = 24 of the 32 registers), the A element broadcast from memory.
// Named registers for the reason given at KernelAvx2.
template <int MR, int NP>
FUSERANK_TARGET_AVX512 void KernelAvx512(int k, const float* a, int lda, const float* panel0,
                                         const float* bias, bool relu, float* c, int ldc, int ncols,
                                         const Epi* e) {
  const float* panel1 = panel0 + static_cast<size_t>(k) * kSgemmPanel;
  const __m512 bias0 = _mm512_load_ps(bias);
  const __m512 bias1 = NP > 1 ? _mm512_load_ps(bias + kSgemmPanel) : _mm512_setzero_ps();
  __m512 c0a = bias0, c0b = bias1, c1a = bias0, c1b = bias1, c2a = bias0, c2b = bias1, c3a = bias0,
         c3b = bias1, c4a = bias0, c4b = bias1, c5a = bias0, c5b = bias1, c6a = bias0, c6b = bias1,
         c7a = bias0, c7b = bias1, c8a = bias0, c8b = bias1, c9a = bias0, c9b = bias1, c10a = bias0,
         c10b = bias1, c11a = bias0, c11b = bias1;
  const float* a0 = a;
  const float* a1 = a0 + (MR > 1 ? lda : 0);
  const float* a2 = a1 + (MR > 2 ? lda : 0);
  const float* a3 = a2 + (MR > 3 ? lda : 0);
  const float* a4 = a3 + (MR > 4 ? lda : 0);
  const float* a5 = a4 + (MR > 5 ? lda : 0);
  const float* a6 = a5 + (MR > 6 ? lda : 0);
  const float* a7 = a6 + (MR > 7 ? lda : 0);
  const float* a8 = a7 + (MR > 8 ? lda : 0);
  const float* a9 = a8 + (MR > 9 ? lda : 0);
  const float* a10 = a9 + (MR > 10 ? lda : 0);
  const float* a11 = a10 + (MR > 11 ? lda : 0);
#define FUSERANK_SGEMM_ROW(r)                                         \
  if constexpr (MR > r) {                                             \
    const __m512 av = _mm512_set1_ps(a##r[p]);                        \
    c##r##a = _mm512_fmadd_ps(av, b0, c##r##a);                       \
    if constexpr (NP > 1) c##r##b = _mm512_fmadd_ps(av, b1, c##r##b); \
  }
#pragma GCC unroll 2
  for (int p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_load_ps(panel0 + static_cast<size_t>(p) * kSgemmPanel);
    const __m512 b1 = NP > 1 ? _mm512_load_ps(panel1 + static_cast<size_t>(p) * kSgemmPanel) : b0;
    FUSERANK_SGEMM_ROW(0)
    FUSERANK_SGEMM_ROW(1)
    FUSERANK_SGEMM_ROW(2)
    FUSERANK_SGEMM_ROW(3)
    FUSERANK_SGEMM_ROW(4)
    FUSERANK_SGEMM_ROW(5)
    FUSERANK_SGEMM_ROW(6)
    FUSERANK_SGEMM_ROW(7)
    FUSERANK_SGEMM_ROW(8)
    FUSERANK_SGEMM_ROW(9)
    FUSERANK_SGEMM_ROW(10)
    FUSERANK_SGEMM_ROW(11)
  }
#undef FUSERANK_SGEMM_ROW
  const __mmask16 mask0 = ColumnMask(ncols);
  const __mmask16 mask1 = ColumnMask(ncols - kSgemmPanel);
#define FUSERANK_SGEMM_STORE(r)                                                   \
  if constexpr (MR > r) {                                                         \
    float* out = c + static_cast<size_t>(r) * ldc;                                \
    StoreAvx512(out, c##r##a, relu, mask0, X0(e, r, 0), XL(e, r, 0));             \
    if constexpr (NP > 1) {                                                       \
      StoreAvx512(out + kSgemmPanel, c##r##b, relu, mask1, X0(e, r, kSgemmPanel), \
                  XL(e, r, kSgemmPanel));                                         \
    }                                                                             \
  }
  FUSERANK_SGEMM_STORE(0)
  FUSERANK_SGEMM_STORE(1)
  FUSERANK_SGEMM_STORE(2)
  FUSERANK_SGEMM_STORE(3)
  FUSERANK_SGEMM_STORE(4)
  FUSERANK_SGEMM_STORE(5)
  FUSERANK_SGEMM_STORE(6)
  FUSERANK_SGEMM_STORE(7)
  FUSERANK_SGEMM_STORE(8)
  FUSERANK_SGEMM_STORE(9)
  FUSERANK_SGEMM_STORE(10)
  FUSERANK_SGEMM_STORE(11)
#undef FUSERANK_SGEMM_STORE
}

}  // namespace

// GCC 12 warns about the _mm512_undefined_ps() inside _mm512_reduce_add_ps.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// n == 1: c[i] = bias + dot(A row i, column), 4 rows at a time (8 accumulators, the
// column loaded once for the 4).
FUSERANK_TARGET_AVX512 void GemvAvx512(int m, int k, const float* a, int lda, const float* column,
                                       float bias, bool relu, float* c, int ldc) {
  int i = 0;
  for (; i < m; i += 4) {
    const int rows = std::min(4, m - i);
    __m512 acc[4][2];
    for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const float* ai[4];
    for (int r = 0; r < 4; ++r) ai[r] = a + static_cast<size_t>(i + std::min(r, rows - 1)) * lda;
    for (int p = 0; p < k; p += 2 * kSgemmPanel) {
      const __mmask16 mask0 = ColumnMask(k - p);
      const __mmask16 mask1 = ColumnMask(k - p - kSgemmPanel);
      const __m512 w0 = _mm512_maskz_loadu_ps(mask0, column + p);
      const __m512 w1 = _mm512_maskz_loadu_ps(mask1, column + p + kSgemmPanel);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        acc[r][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask0, ai[r] + p), w0, acc[r][0]);
        acc[r][1] =
            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask1, ai[r] + p + kSgemmPanel), w1, acc[r][1]);
      }
    }
    for (int r = 0; r < rows; ++r) {
      const float v = bias + _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
      c[static_cast<size_t>(i + r) * ldc] = SaturateFinite(relu ? std::max(v, 0.0f) : v);
    }
  }
}
#pragma GCC diagnostic pop

namespace {

// Rows per AVX-512 micro-kernel call; kernels for 1 .. kRowsAvx512 rows, by NP.
constexpr int kRowsAvx512 = 12;
using KernelFn = void (*)(int, const float*, int, const float*, const float*, bool, float*, int,
                          int, const Epi*);

template <int NP, int... R>
constexpr std::array<KernelFn, sizeof...(R)> Avx512Kernels(std::integer_sequence<int, R...>) {
  return {&KernelAvx512<R + 1, NP>...};
}

constexpr std::array<KernelFn, kRowsAvx512> kAvx512Kernels1 =
    Avx512Kernels<1>(std::make_integer_sequence<int, kRowsAvx512>());
constexpr std::array<KernelFn, kRowsAvx512> kAvx512Kernels2 =
    Avx512Kernels<2>(std::make_integer_sequence<int, kRowsAvx512>());

}  // namespace

// Panels [first, last) two at a time (the last one alone when their count is odd).
void SgemmAvx512(int m, const float* a, int lda, const PackedMatrix& b, int first, int last,
                 const float* bias16s, bool relu, float* c, int ldc, const Epi* e) {
  for (int j = first; j < last; j += 2) {
    const bool pair = j + 1 < last;
    const std::array<KernelFn, kRowsAvx512>& kernels = pair ? kAvx512Kernels2 : kAvx512Kernels1;
    const int ncols = std::min((pair ? 2 : 1) * kSgemmPanel, b.n() - j * kSgemmPanel);
    const float* bias = bias16s + (j - first) * kSgemmPanel;
    const float* panel = b.panel(j);
    float* cj = c + j * kSgemmPanel;
    // Row blocks of near-equal size (64 rows: 10, 10, 11, 11, 11, 11), not 12s and a
    // small remainder that would leave the FMA pipes waiting on too few accumulators.
    const int blocks = (m + kRowsAvx512 - 1) / kRowsAvx512;
    Epi shifted;
    for (int block = 0, i = 0; block < blocks; ++block) {
      const int rows = (m - i) / (blocks - block);
      const Epi* ei = e != nullptr ? &(shifted = Shift(*e, i, j * kSgemmPanel)) : e;
      kernels[rows - 1](b.k(), a + static_cast<size_t>(i) * lda, lda, panel, bias, relu,
                        cj + static_cast<size_t>(i) * ldc, ldc, ncols, ei);
      i += rows;
    }
  }
}

}  // namespace fuserank::engine::sgemm_internal

#endif  // FUSERANK_HAVE_AVX512_PATH

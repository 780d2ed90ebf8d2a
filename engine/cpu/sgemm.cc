#include "engine/cpu/sgemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "engine/cpu/cpu_simd.h"

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

// A CrossEpilogue shifted to one micro-kernel's block: x0 and xl at the block's (row 0,
// column 0). Kernels take it by pointer, null for none.
struct Epi {
  const float* x0;
  size_t ld0;
  const float* xl;
  size_t ldl;
};

FUSERANK_INLINE Epi Shift(const Epi& e, size_t row, int col) {
  return {e.x0 + row * e.ld0 + col, e.ld0, e.xl + row * e.ldl + col, e.ldl};
}
FUSERANK_INLINE const float* X0(const Epi* e, int r, int col) {
  return e != nullptr ? e->x0 + r * e->ld0 + col : nullptr;
}
FUSERANK_INLINE const float* XL(const Epi* e, int r, int col) {
  return e != nullptr ? e->xl + r * e->ldl + col : nullptr;
}

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
    for (int l = 0; l < ncols; ++l) out[l] = x0[l] * tmp[l] + xl[l];
    return;
  }
  for (int l = 0; l < ncols; ++l) out[l] = relu ? std::max(tmp[l], 0.0f) : tmp[l];
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
      _mm256_storeu_ps(out, lo);
      _mm256_storeu_ps(out + 8, hi);
    } else {
      alignas(32) float tmp[kSgemmPanel];
      _mm256_store_ps(tmp, lo);
      _mm256_store_ps(tmp + 8, hi);
      for (int l = 0; l < ncols; ++l) out[l] = x0[l] * tmp[l] + xl[l];
    }
    return;
  }
  if (relu) {
    lo = _mm256_max_ps(lo, _mm256_setzero_ps());
    hi = _mm256_max_ps(hi, _mm256_setzero_ps());
  }
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

#if FUSERANK_HAVE_AVX512_PATH

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
    _mm512_mask_storeu_ps(out, mask, v);
    return;
  }
  // The masked form: GCC 12 warns about the _mm512_undefined_ps() in _mm512_max_ps.
  if (relu) v = _mm512_maskz_max_ps(0xFFFF, v, _mm512_setzero_ps());
  _mm512_mask_storeu_ps(out, mask, v);
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
      c[static_cast<size_t>(i + r) * ldc] = relu ? std::max(v, 0.0f) : v;
    }
  }
}
#pragma GCC diagnostic pop

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

#endif  // FUSERANK_HAVE_AVX512_PATH

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
    GemvAvx512(m, b.k(), a, lda, b.column(), bias != nullptr ? bias[0] : 0.0f, relu, c, ldc);
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
      SgemmAvx512(m, a, lda, b, first, last, bias16s, relu, c, ldc, e);
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

#include "engine/cpu/cpu_gram_dots.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "engine/cpu/cpu_simd.h"

#if FUSERANK_HAVE_AVX2_PATH || FUSERANK_HAVE_AVX512_PATH
#include <immintrin.h>
#endif

namespace fuserank::engine {
namespace {

// The matrix t for `args`, columns in vectors of `lanes`; no t when the rows have no dots.
struct Scratch {
  float* t = nullptr;
  int columns = 0;  // num_shared + num_own - 1
  int pitch = 0;    // t's row length: columns rounded up to `lanes`
};

Scratch ScratchFor(const GramArgs& args, float* t, int lanes) {
  Scratch s;
  s.columns = args.num_shared + args.num_own - 1;
  if (s.columns <= 0 || args.rows <= 0) return s;  // no dots
  s.pitch = (s.columns + lanes - 1) / lanes * lanes;
  s.t = t;
  // The shared columns, and zeros past the last column, once for all candidates.
  for (int k = 0; k < args.d; ++k) {
    float* row = s.t + static_cast<size_t>(k) * s.pitch;
    for (int j = 0; j < args.num_shared; ++j) {
      row[j] = args.shared[static_cast<size_t>(j) * args.d + k];
    }
    std::fill(row + s.columns, row + s.pitch, 0.0f);
  }
  return s;
}

// Own vectors first .. last - 1 of a candidate into their columns, one element at a time
// (what is left after the whole blocks the paths transpose in registers).
void ColumnsOneByOne(const GramArgs& args, const Scratch& s, const float* own, int first,
                     int last) {
  for (int q = first; q < last; ++q) {
    const float* v = own + static_cast<size_t>(q) * args.d;
    float* column = s.t + args.num_shared + q;
    for (int k = 0; k < args.d; ++k) column[static_cast<size_t>(k) * s.pitch] = v[k];
  }
}

// Where row o of a candidate's output starts: o rows before it, of num_shared + o' dots.
float* OutputRow(const GramArgs& args, float* out, int o) {
  const ptrdiff_t before =
      static_cast<ptrdiff_t>(o) * args.num_shared + static_cast<ptrdiff_t>(o) * (o - 1) / 2;
  return out + before;
}

#if FUSERANK_HAVE_AVX512_PATH
// GCC 12 warns about the _mm512_undefined_ps() inside the shuffle intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

FUSERANK_TARGET_AVX512 FUSERANK_INLINE __mmask16 FirstLanes16(int count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffff : (1u << count) - 1);
}

// Rows o0 .. o0 + rows - 1 (rows <= kRows) of one candidate against t's column vectors
// block .. block + kBlocks - 1; rows past the last repeat it and store nothing. Eight
// accumulators or more keep both FMA pipes busy (an FMA's latency is about four of them).
template <int kRows, int kBlocks>
FUSERANK_TARGET_AVX512 FUSERANK_INLINE void RowBlock512(const GramArgs& args, const Scratch& s,
                                                        const float* own, int o0, int rows,
                                                        int block, float* out) {
  const int d = args.d;
  const float* x[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) x[r] = own + static_cast<size_t>(o0 + std::min(r, rows - 1)) * d;
  const float* t = s.t + static_cast<size_t>(block) * 16;
  __m512 acc[kRows][kBlocks];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) acc[r][b] = _mm512_setzero_ps();
  }
  for (int k = 0; k < d; ++k, t += s.pitch) {
    __m512 column[kBlocks];
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) column[b] = _mm512_loadu_ps(t + 16 * b);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 element = _mm512_set1_ps(x[r][k]);
#pragma GCC unroll 4
      for (int b = 0; b < kBlocks; ++b) acc[r][b] = _mm512_fmadd_ps(element, column[b], acc[r][b]);
    }
  }
  // Unrolled, so that every accumulator is a register (an index known only at run time
  // would keep them all in memory through the loop above).
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    float* row = OutputRow(args, out, o0 + r);
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) {
      const int column = (block + b) * 16;
      const int count = args.num_shared + o0 + r - column;  // row o has num_shared + o dots
      if (count > 0) _mm512_mask_storeu_ps(row + column, FirstLanes16(count), acc[r][b]);
    }
  }
}

// Sixteen vectors' elements k .. k + count - 1 (count <= 16; vector i at v + i * d) into
// rows k .. of 16 columns of t (dst[e * pitch + i] = v[i * d + e]): a 16 x 16 transpose in
// registers, 64 shuffles.
FUSERANK_TARGET_AVX512 FUSERANK_INLINE void SixteenColumns(const float* v, int d, int count,
                                                           float* dst, int pitch) {
  const __mmask16 mask = FirstLanes16(count);
  __m512 r[16], u[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(mask, v + static_cast<size_t>(i) * d);
  // Pairs of vectors interleaved, then fours: r[4g + m] holds, in 128-bit quarter L,
  // element 4L + m of vectors 4g .. 4g + 3.
  for (int i = 0; i < 16; i += 2) {
    u[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    u[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Then quarters: element 4L + m is quarter L of r[m], r[4 + m], r[8 + m], r[12 + m].
  for (int m = 0; m < 4; ++m) {
    u[m] = _mm512_shuffle_f32x4(r[m], r[4 + m], _MM_SHUFFLE(2, 0, 2, 0));      // L 0, 2
    u[4 + m] = _mm512_shuffle_f32x4(r[m], r[4 + m], _MM_SHUFFLE(3, 1, 3, 1));  // L 1, 3
    u[8 + m] = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(2, 0, 2, 0));
    u[12 + m] = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(3, 1, 3, 1));
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm512_shuffle_f32x4(u[m], u[8 + m], _MM_SHUFFLE(2, 0, 2, 0));            // L 0
    r[8 + m] = _mm512_shuffle_f32x4(u[m], u[8 + m], _MM_SHUFFLE(3, 1, 3, 1));        // L 2
    r[4 + m] = _mm512_shuffle_f32x4(u[4 + m], u[12 + m], _MM_SHUFFLE(2, 0, 2, 0));   // L 1
    r[12 + m] = _mm512_shuffle_f32x4(u[4 + m], u[12 + m], _MM_SHUFFLE(3, 1, 3, 1));  // L 3
  }
  for (int e = 0; e < count; ++e) _mm512_storeu_ps(dst + static_cast<size_t>(e) * pitch, r[e]);
}

FUSERANK_TARGET_AVX512 void Rows512(const GramArgs& args, const Scratch& s) {
  const int d = args.d;
  for (int c = 0; c < args.rows; ++c) {
    const float* own = args.own + static_cast<size_t>(c) * args.own_stride;
    float* out = args.out + static_cast<size_t>(c) * args.out_stride;
    int q = 0;
    for (; q + 16 < args.num_own; q += 16) {
      for (int k = 0; k < d; k += 16) {
        SixteenColumns(own + static_cast<size_t>(q) * d + k, d, std::min(16, d - k),
                       s.t + static_cast<size_t>(k) * s.pitch + args.num_shared + q, s.pitch);
      }
    }
    ColumnsOneByOne(args, s, own, q, args.num_own - 1);
    for (int o0 = 0; o0 < args.num_own;) {
      // Eight rows at a time while their dots fit one column vector, else four.
      const int eight = std::min(8, args.num_own - o0);
      if (eight > 4 && args.num_shared + o0 + eight - 1 <= 16) {
        RowBlock512<8, 1>(args, s, own, o0, eight, 0, out);
        o0 += eight;
        continue;
      }
      const int rows = std::min(4, args.num_own - o0);
      const int blocks = (args.num_shared + o0 + rows - 1 + 15) / 16;  // its last row's dots
      int block = 0;
      for (; block + 4 <= blocks; block += 4) RowBlock512<4, 4>(args, s, own, o0, rows, block, out);
      if (blocks - block == 3) RowBlock512<4, 3>(args, s, own, o0, rows, block, out);
      if (blocks - block == 2) RowBlock512<4, 2>(args, s, own, o0, rows, block, out);
      if (blocks - block == 1) RowBlock512<4, 1>(args, s, own, o0, rows, block, out);
      o0 += rows;
    }
  }
}
#pragma GCC diagnostic pop
#endif  // FUSERANK_HAVE_AVX512_PATH

#if FUSERANK_HAVE_AVX2_PATH
// The first `count` floats of v to dst (count < 8: the end of an output row, which the
// next row's, or the next candidate's, or nothing's, follows).
FUSERANK_TARGET_AVX2 FUSERANK_INLINE void StoreFirst(float* dst, __m256 v, int count) {
  if (count >= 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  std::memcpy(dst, lanes, static_cast<size_t>(count) * sizeof(float));
}

// As RowBlock512 with 8-wide column vectors (16 registers: at most 8 accumulators).
template <int kRows, int kBlocks>
FUSERANK_TARGET_AVX2 FUSERANK_INLINE void RowBlock256(const GramArgs& args, const Scratch& s,
                                                      const float* own, int o0, int rows, int block,
                                                      float* out) {
  static_assert(kRows * kBlocks <= 8);
  const int d = args.d;
  const float* x[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) x[r] = own + static_cast<size_t>(o0 + std::min(r, rows - 1)) * d;
  const float* t = s.t + static_cast<size_t>(block) * 8;
  __m256 acc[kRows][kBlocks];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int b = 0; b < kBlocks; ++b) acc[r][b] = _mm256_setzero_ps();
  }
  for (int k = 0; k < d; ++k, t += s.pitch) {
    __m256 column[kBlocks];
#pragma GCC unroll 2
    for (int b = 0; b < kBlocks; ++b) column[b] = _mm256_loadu_ps(t + 8 * b);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256 element = _mm256_broadcast_ss(x[r] + k);
#pragma GCC unroll 2
      for (int b = 0; b < kBlocks; ++b) acc[r][b] = _mm256_fmadd_ps(element, column[b], acc[r][b]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {  // unrolled: see RowBlock512
    if (r >= rows) break;
    float* row = OutputRow(args, out, o0 + r);
#pragma GCC unroll 2
    for (int b = 0; b < kBlocks; ++b) {
      const int column = (block + b) * 8;
      const int count = args.num_shared + o0 + r - column;
      if (count > 0) StoreFirst(row + column, acc[r][b], count);
    }
  }
}

// As SixteenColumns for eight vectors and count <= 8: an 8 x 8 transpose, 24 shuffles.
FUSERANK_TARGET_AVX2 FUSERANK_INLINE void EightColumns(const float* v, int d, int count, float* dst,
                                                       int pitch) {
  alignas(32) static constexpr int kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - count));
  __m256 r[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_maskload_ps(v + static_cast<size_t>(i) * d, mask);
  for (int i = 0; i < 8; i += 2) {
    u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4g + m] holds, in 128-bit half L, element 4L + m of vectors 4g .. 4g + 3.
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int m = 0; m < 4; ++m) {
    u[m] = _mm256_permute2f128_ps(r[m], r[4 + m], 0x20);      // half 0 of both: element m
    u[4 + m] = _mm256_permute2f128_ps(r[m], r[4 + m], 0x31);  // half 1: element 4 + m
  }
  for (int e = 0; e < count; ++e) _mm256_storeu_ps(dst + static_cast<size_t>(e) * pitch, u[e]);
}

// Rows512's loop with this path's blocks. Not one template for both: the blocks must
// inline into a function compiled for their ISA, and calling them out of line from a
// shared baseline loop measured 5-13% slower at widths 4-12.
FUSERANK_TARGET_AVX2 void Rows256(const GramArgs& args, const Scratch& s) {
  const int d = args.d;
  for (int c = 0; c < args.rows; ++c) {
    const float* own = args.own + static_cast<size_t>(c) * args.own_stride;
    float* out = args.out + static_cast<size_t>(c) * args.out_stride;
    int q = 0;
    for (; q + 8 < args.num_own; q += 8) {
      for (int k = 0; k < d; k += 8) {
        EightColumns(own + static_cast<size_t>(q) * d + k, d, std::min(8, d - k),
                     s.t + static_cast<size_t>(k) * s.pitch + args.num_shared + q, s.pitch);
      }
    }
    ColumnsOneByOne(args, s, own, q, args.num_own - 1);
    for (int o0 = 0; o0 < args.num_own;) {
      const int eight = std::min(8, args.num_own - o0);
      if (eight > 4 && args.num_shared + o0 + eight - 1 <= 8) {
        RowBlock256<8, 1>(args, s, own, o0, eight, 0, out);
        o0 += eight;
        continue;
      }
      const int rows = std::min(4, args.num_own - o0);
      const int blocks = (args.num_shared + o0 + rows - 1 + 7) / 8;
      int block = 0;
      for (; block + 2 <= blocks; block += 2) RowBlock256<4, 2>(args, s, own, o0, rows, block, out);
      if (block < blocks) RowBlock256<4, 1>(args, s, own, o0, rows, block, out);
      o0 += rows;
    }
  }
}
#endif  // FUSERANK_HAVE_AVX2_PATH

}  // namespace

size_t GramMatrixFloats(int num_shared, int num_own, int d) {
  const int columns = num_shared + num_own - 1;
  if (columns <= 0 || d <= 0) return 0;
  return static_cast<size_t>(d) * ((columns + 15) / 16 * 16);
}

void GramRowsMatrixAvx512(const GramArgs& args, float* t) {
#if FUSERANK_HAVE_AVX512_PATH
  const Scratch s = ScratchFor(args, t, 16);
  if (s.t != nullptr) Rows512(args, s);
#else
  (void)args;
  (void)t;
#endif
}

void GramRowsMatrixAvx2(const GramArgs& args, float* t) {
#if FUSERANK_HAVE_AVX2_PATH
  const Scratch s = ScratchFor(args, t, 8);
  if (s.t != nullptr) Rows256(args, s);
#else
  (void)args;
  (void)t;
#endif
}

}  // namespace fuserank::engine

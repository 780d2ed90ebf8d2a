// Pieces of the CPU sgemm shared by its per-ISA translation units (sgemm.cc: packing, the
// baseline and AVX2 kernels and the dispatch; sgemm_avx512.cc: the AVX-512 kernels). Not
// for use outside them.
#ifndef FUSERANK_ENGINE_CPU_SGEMM_INTERNAL_H_
#define FUSERANK_ENGINE_CPU_SGEMM_INTERNAL_H_

#include <cstddef>

#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm.h"

namespace fuserank::engine::sgemm_internal {

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

#if FUSERANK_HAVE_AVX512_PATH
// Panels [first, last) of C = A * B (bias16s: 16 zero-padded bias floats per panel from
// `first`), two panels at a time, row blocks of near-equal size; `e` null for no epilogue.
void SgemmAvx512(int m, const float* a, int lda, const PackedMatrix& b, int first, int last,
                 const float* bias16s, bool relu, float* c, int ldc, const Epi* e);
// n == 1: c[i] = bias + dot(A row i, column).
void GemvAvx512(int m, int k, const float* a, int lda, const float* column, float bias, bool relu,
                float* c, int ldc);
#endif

}  // namespace fuserank::engine::sgemm_internal

#endif  // FUSERANK_ENGINE_CPU_SGEMM_INTERNAL_H_

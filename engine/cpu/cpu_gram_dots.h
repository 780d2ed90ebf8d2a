// DotGramRows' matrix-product kernels (engine/cpu/cpu_interaction.cc picks one): each
// candidate's dots as a small matrix product, with no horizontal sums. A scratch matrix t
// holds, as columns, the vectors the dots are taken against -- the shared ones, then the
// candidate's own but its last -- element k of every column in t's row k. Output row o
// ([own_o . column j for j < num_shared + o], DotGramRows' order) is then, one vector of
// columns at a time, the sum over k of own_o[k] * t[k][j ..]: one FMA per k, in k order,
// from +0, so each dot is the chain s = fma(a[k], b[k], s) over k -- on both paths, bit for
// bit, and the CUDA dot kernel's arithmetic. Internal to the CPU engine. Thread-safe on
// distinct outputs and scratch.
#ifndef FUSERANK_ENGINE_CPU_CPU_GRAM_DOTS_H_
#define FUSERANK_ENGINE_CPU_CPU_GRAM_DOTS_H_

#include <cstddef>

namespace fuserank::engine {

// DotGramRows' arguments (cpu_interaction.h).
struct GramArgs {
  const float* shared;
  int num_shared;
  const float* own;
  int num_own;
  int own_stride;
  int d;
  int rows;
  float* out;
  int out_stride;
};

// Floats of the matrix t for these shapes: d rows of the columns rounded up to 16.
size_t GramMatrixFloats(int num_shared, int num_own, int d);

// `t` holds GramMatrixFloats(args.num_shared, args.num_own, args.d) floats (any content).
// REQUIRES: args.d >= 1.
// REQUIRES: the CPU runs the path (CpuSupports(CpuIsa::kAvx512), resp. kAvx2).
void GramRowsMatrixAvx512(const GramArgs& args, float* t);
void GramRowsMatrixAvx2(const GramArgs& args, float* t);

// Whether the avx2 path takes the matrix product for width d (the avx512 path always
// does). Not for widths that are a multiple of 8 from 32 up: there the 256-bit product
// is FMA-bound at about the speed of four dots at a time with horizontal sums, which
// DotGramRows keeps (measured: docs/benchmarks.md, "CPU engine: the dot interaction as a
// matrix product").
inline bool Avx2TakesMatrixProduct(int d) { return d % 8 != 0 || d < 32; }

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_GRAM_DOTS_H_

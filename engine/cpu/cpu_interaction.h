// The CPU engine's feature-interaction stage (SPEC section 2, step 4): dot products of
// pairs of pooled vectors, DLRM style. `concat` (and `linear`, folded into the first top
// layer at load) needs no compute of its own: the vectors are written side by side.
// Also the reference for the CUDA interaction kernel. Stateless; thread-safe on distinct
// outputs.
#ifndef FUSERANK_ENGINE_CPU_CPU_INTERACTION_H_
#define FUSERANK_ENGINE_CPU_CPU_INTERACTION_H_

#include <cstddef>
#include <vector>

namespace fuserank::engine {

// DLRM dot interaction: row c holds n vectors of width d at v + c * v_stride + i * d.
// Writes the n(n-1)/2 dots of pairs (i, j), j < i, i ascending then j ascending, to
// out + c * out_stride. Float32 accumulation. Allocates its scratch (a reference for tests;
// the engine calls DotGramRows).
void DotInteraction(const float* v, int rows, int n, int d, int v_stride, float* out,
                    int out_stride);

// The dots of one row's own vectors with shared vectors and with each other: row c has
// num_own vectors of width d at own + c * own_stride + o * d; `shared` holds num_shared
// vectors (shared + s * d) common to every row (a request's user vectors). Writes to
// out + c * out_stride, for o = 0 .. num_own - 1 in turn: dot(own_o, shared_s) for
// s = 0 .. num_shared - 1, then dot(own_o, own_q) for q = 0 .. o - 1; that is
// num_own * num_shared + num_own * (num_own - 1) / 2 floats. With num_shared == 0 this
// is DotInteraction. Float32 accumulation. `scratch` (not null) is working space, grown to
// DotGramScratchFloats(num_shared, num_own, d) floats when smaller (size it once to keep
// the call from allocating); its content on entry does not matter.
void DotGramRows(const float* shared, int num_shared, const float* own, int num_own, int own_stride,
                 int d, int rows, float* out, int out_stride, std::vector<float>* scratch);

// The floats of scratch DotGramRows uses for these shapes.
size_t DotGramScratchFloats(int num_shared, int num_own, int d);

// One dot product of two width-d vectors, each named by a source and an offset. For
// row c, source s starts at sources[s] + c * strides[s]; a stride of 0 makes the source
// the same for every row.
struct DotTerm {
  int a_source = 0;
  int a_offset = 0;
  int b_source = 0;
  int b_offset = 0;
};

// For c in [0, rows), t in [0, num_terms): out[c * out_stride + t] = dot(A, B) of term t.
// Slower than DotGramRows; for arbitrary pair lists (a request's user-user dots).
void DotTerms(const DotTerm* terms, int num_terms, int d, int rows, const float* const* sources,
              const int* strides, float* out, int out_stride);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_INTERACTION_H_

// The CPU engine's feature-interaction stage (SPEC section 2, step 4): dot products of
// pairs of pooled vectors, DLRM style. `concat` (and `linear`, folded into the first top
// layer at load) needs no compute of its own: the vectors are written side by side.
// Also the reference for the CUDA interaction kernel. Stateless; thread-safe on distinct
// outputs.
#ifndef FUSERANK_ENGINE_CPU_INTERACTION_H_
#define FUSERANK_ENGINE_CPU_INTERACTION_H_

namespace fuserank::engine {

// One dot product of two width-d vectors, each named by a source and an offset. For
// row c, source s starts at sources[s] + c * strides[s]; a stride of 0 makes the source
// the same for every row (e.g. the request's pooled user vectors).
struct DotTerm {
  int a_source = 0;
  int a_offset = 0;
  int b_source = 0;
  int b_offset = 0;
};

// For c in [0, rows), t in [0, num_terms): out[c * out_stride + t] = dot(A, B) of term t.
// Float32 accumulation (16 partial sums, fixed reduction order).
void DotTerms(const DotTerm* terms, int num_terms, int d, int rows, const float* const* sources,
              const int* strides, float* out, int out_stride);

// DLRM dot interaction: row c holds n vectors of width d at v + c * v_stride + i * d.
// Writes the n(n-1)/2 dots of pairs (i, j), j < i, i ascending then j ascending, to
// out + c * out_stride.
void DotInteraction(const float* v, int rows, int n, int d, int v_stride, float* out,
                    int out_stride);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_INTERACTION_H_

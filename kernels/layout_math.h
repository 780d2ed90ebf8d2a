// Index arithmetic shared by the host packer, the kernels and their CPU tests: batch-size
// buckets, lane groups of the lookup, request of a candidate, and the (i, j) pair of a
// dot-interaction output. Pure functions; no CUDA header is needed to include this file.
#ifndef FUSERANK_KERNELS_LAYOUT_MATH_H_
#define FUSERANK_KERNELS_LAYOUT_MATH_H_

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace fuserank::kernels {

// Smallest candidate bucket: batches below it share the graph of this size.
inline constexpr uint32_t kMinCandidateBucket = 16;

FUSERANK_HD uint32_t RoundUp(uint32_t value, uint32_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Smallest power of two >= value (1 for 0 and 1). REQUIRES: value <= 2^31.
FUSERANK_HD uint32_t NextPow2(uint32_t value) {
  uint32_t p = 1;
  while (p < value) p <<= 1;
  return p;
}

// The bucket (graph size) a batch of `candidates` candidates runs in.
FUSERANK_HD uint32_t CandidateBucket(uint32_t candidates) {
  const uint32_t p = NextPow2(candidates);
  return p < kMinCandidateBucket ? kMinCandidateBucket : p;
}

// 0 for kMinCandidateBucket, 1 for twice that, ... REQUIRES: bucket is a bucket.
FUSERANK_HD int BucketIndex(uint32_t bucket) {
  int index = 0;
  for (uint32_t b = kMinCandidateBucket; b < bucket; b <<= 1) ++index;
  return index;
}

// Lookup: a row is read in 16-byte vectors when its width in bytes is a multiple of 16
// (table bases are 256-byte aligned, so every row then is too); else element by element.
FUSERANK_HD bool UseVectorLoads(int dim, int elem_bytes) { return (dim * elem_bytes) % 16 == 0; }

// Work units of one row: 16-byte vectors on the vector path, elements otherwise.
FUSERANK_HD int RowUnits(int dim, int elem_bytes) {
  return UseVectorLoads(dim, elem_bytes) ? dim * elem_bytes / 16 : dim;
}

// Lanes that pool one bag: the power of two in [4, 32] closest above the widest row's
// units, so one group covers a row in one step where it can (dim 32 fp32 = 8 lanes).
FUSERANK_HD int LookupLanes(int max_row_units) {
  int lanes = 4;
  while (lanes < 32 && lanes < max_row_units) lanes <<= 1;
  return lanes;
}

// The request that candidate `c` belongs to: the last r with candidate_begin[r] <= c.
// REQUIRES: candidate_begin has num_requests + 1 ascending entries and
// c < candidate_begin[num_requests].
FUSERANK_HD uint32_t RequestOfCandidate(const uint32_t* candidate_begin, uint32_t num_requests,
                                        uint32_t c) {
  uint32_t lo = 0;
  uint32_t hi = num_requests;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (candidate_begin[mid] <= c) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Number of dot products among n vectors: pairs (i, j) with j < i.
FUSERANK_HD uint32_t NumPairs(uint32_t n) { return n * (n - (n > 0 ? 1 : 0)) / 2; }

// Pair p of the dot interaction in SPEC order (i = 1..n-1 ascending, then j = 0..i-1):
// p = i * (i - 1) / 2 + j.
FUSERANK_HD void PairFromIndex(uint32_t p, uint32_t* i, uint32_t* j) {
  // Estimate with floating point, then correct by one either way (exact for p < 2^31).
  uint32_t r = static_cast<uint32_t>((1.0 + sqrt(1.0 + 8.0 * static_cast<double>(p))) / 2.0);
  while (r > 1 && r * (r - 1) / 2 > p) --r;
  while ((r + 1) * r / 2 <= p) ++r;
  *i = r;
  *j = p - r * (r - 1) / 2;
}

// Moves pair (i, j) forward by `step` pairs in the same order (cheaper than
// PairFromIndex when a lane walks the pairs with a fixed stride).
FUSERANK_HD void AdvancePair(uint32_t step, uint32_t* i, uint32_t* j) {
  uint32_t jj = *j + step;
  uint32_t ii = *i;
  while (jj >= ii) {
    jj -= ii;
    ++ii;
  }
  *i = ii;
  *j = jj;
}

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_LAYOUT_MATH_H_

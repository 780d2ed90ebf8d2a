// Top-K selection of one request's scores: the K best (index, score) pairs, score
// descending, ties broken by the lower index (SPEC section 1, RankResponse.items). The
// CPU engine's top-K stage and the reference for the CUDA top-K kernel. Stateless, no
// allocation; thread-safe on distinct outputs.
#ifndef FUSERANK_ENGINE_TOPK_H_
#define FUSERANK_ENGINE_TOPK_H_

#include "engine/batch.h"

namespace fuserank::engine {

// True when a ranks before b: higher score, or equal scores and lower index. NaN ranks
// after every number (and NaNs among themselves by index), so the order stays total.
bool RanksBefore(const ScoredIndex& a, const ScoredIndex& b);

// Writes the min(k, n) best of scores[0 .. n) to out[0 .. min(k, n)), best first; index
// is the position in `scores`. O(n log k) with a bounded heap kept in `out`.
// k <= 0 writes nothing. REQUIRES: `out` has room for min(k, n) entries.
void TopK(const float* scores, int n, int k, ScoredIndex* out);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_TOPK_H_

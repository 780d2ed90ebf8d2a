#include "engine/topk.h"

#include <algorithm>
#include <cmath>

namespace fuserank::engine {

bool RanksBefore(const ScoredIndex& a, const ScoredIndex& b) {
  const bool a_nan = std::isnan(a.score);
  const bool b_nan = std::isnan(b.score);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.score != b.score) return a.score > b.score;
  return a.index < b.index;
}

void TopK(const float* scores, int n, int k, ScoredIndex* out) {
  const int keep = std::min(k, n);
  if (keep <= 0) return;
  // A heap ordered by RanksBefore keeps the worst kept item at out[0].
  for (int i = 0; i < keep; ++i) out[i] = {static_cast<uint32_t>(i), scores[i]};
  std::make_heap(out, out + keep, RanksBefore);
  for (int i = keep; i < n; ++i) {
    const ScoredIndex candidate{static_cast<uint32_t>(i), scores[i]};
    if (!RanksBefore(candidate, out[0])) continue;
    std::pop_heap(out, out + keep, RanksBefore);
    out[keep - 1] = candidate;
    std::push_heap(out, out + keep, RanksBefore);
  }
  std::sort_heap(out, out + keep, RanksBefore);
}

}  // namespace fuserank::engine

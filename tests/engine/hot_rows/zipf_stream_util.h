// Seeded Zipf streams of table rows and an independent top-N reference for the hot-row
// tests: exact counts, and the overlap of a chosen set with the true top N by count.
// Plain functions; thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_HOT_ROWS_ZIPF_STREAM_UTIL_H_
#define FUSERANK_TESTS_ENGINE_HOT_ROWS_ZIPF_STREAM_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace fuserank::engine::test {

// `draws` rows of a table of `rows` rows: rank k (1-based) has probability proportional
// to k^-alpha, and ranks are assigned to rows by a seeded random permutation (so the hot
// rows are scattered, not 0, 1, 2, ...).
std::vector<int32_t> ZipfDraws(int32_t rows, double alpha, int64_t draws, uint64_t seed);

// Exact access count of every row in [0, rows).
std::vector<int64_t> CountRows(absl::Span<const int32_t> draws, int32_t rows);

// The true top n rows by count (ties: lower row first).
std::vector<int32_t> TrueTopN(absl::Span<const int64_t> counts, int n);

// |chosen ∩ TrueTopN(counts, n)| / n.
double StrictOverlap(absl::Span<const int64_t> counts, absl::Span<const int32_t> chosen, int n);
// The fraction of n slots filled by chosen rows whose true count is >= the n-th highest
// count (rows tied with the boundary are as good as the ones the tie-break picked):
// min(n, #good chosen) / n.
double TieAwareOverlap(absl::Span<const int64_t> counts, absl::Span<const int32_t> chosen, int n);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_HOT_ROWS_ZIPF_STREAM_UTIL_H_

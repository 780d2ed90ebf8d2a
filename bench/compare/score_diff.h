// Compares two fuserank servers' answers to the same RankRequest, candidate by candidate:
// the largest score difference, and positions where the two rankings differ. Used to check
// the server on one engine (the CUDA backend) against the same server on another (the CPU
// engine) through gRPC. Plain functions on plain data; not thread-safe per ScoreDiff.
#ifndef FUSERANK_BENCH_COMPARE_SCORE_DIFF_H_
#define FUSERANK_BENCH_COMPARE_SCORE_DIFF_H_

#include <string>

#include "fuserank/v1/ranker.pb.h"

namespace fuserank::bench {

struct ScoreDiff {
  int requests = 0;         // compared
  int errors = 0;           // answers that cannot be compared (shape, index, NaN)
  double max_abs_diff = 0;  // over every candidate answered by both
  // Ranks where the two lists name different candidates whose reference scores differ by
  // more than the tolerance (a real order difference) ...
  int order_mismatches = 0;
  // ... and where they differ by at most the tolerance (near ties that rounding may swap).
  int near_tie_swaps = 0;
  std::string first_error;  // the first uncomparable answer, for the report
};

// Adds one request's answers: `test` from the server under test, `reference` from the
// reference server; both answered top_k = 0 (every candidate, ranked) for a request of
// `candidates` candidates.
void AddComparison(const v1::RankResponse& test, const v1::RankResponse& reference, int candidates,
                   double tolerance, ScoreDiff* diff);

// Counts a call that failed on either side.
void AddError(const std::string& what, ScoreDiff* diff);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_COMPARE_SCORE_DIFF_H_

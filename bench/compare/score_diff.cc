#include "bench/compare/score_diff.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fuserank::bench {
namespace {

// Scores by candidate index; false when the list is not one item per candidate.
bool ScoresByIndex(const v1::RankResponse& response, int candidates, std::vector<double>* out) {
  if (response.items_size() != candidates) return false;
  out->assign(candidates, std::nan(""));
  for (const v1::ScoredItem& item : response.items()) {
    if (item.index() >= static_cast<uint32_t>(candidates) || !std::isnan((*out)[item.index()]) ||
        std::isnan(item.score())) {
      return false;
    }
    (*out)[item.index()] = item.score();
  }
  return true;
}

}  // namespace

void AddError(const std::string& what, ScoreDiff* diff) {
  ++diff->requests;
  ++diff->errors;
  if (diff->first_error.empty()) diff->first_error = what;
}

void AddComparison(const v1::RankResponse& test, const v1::RankResponse& reference, int candidates,
                   double tolerance, ScoreDiff* diff) {
  std::vector<double> got, want;
  if (!ScoresByIndex(test, candidates, &got) || !ScoresByIndex(reference, candidates, &want)) {
    AddError(absl::StrCat("request ", diff->requests, ": ", test.items_size(), " and ",
                          reference.items_size(), " items for ", candidates,
                          " candidates, or a bad index or NaN score"),
             diff);
    return;
  }
  ++diff->requests;
  for (int c = 0; c < candidates; ++c) {
    diff->max_abs_diff = std::max(diff->max_abs_diff, std::fabs(got[c] - want[c]));
  }
  for (int p = 0; p < candidates; ++p) {
    const uint32_t a = test.items(p).index();
    const uint32_t b = reference.items(p).index();
    if (a == b) continue;
    if (std::fabs(want[a] - want[b]) > tolerance) {
      ++diff->order_mismatches;
    } else {
      ++diff->near_tie_swaps;
    }
  }
}

}  // namespace fuserank::bench

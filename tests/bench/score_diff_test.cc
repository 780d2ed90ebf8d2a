#include "bench/compare/score_diff.h"

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

// A response ranking candidates in `order` with scores[index].
v1::RankResponse Ranked(const std::vector<uint32_t>& order, const std::vector<float>& scores) {
  v1::RankResponse r;
  for (uint32_t i : order) {
    v1::ScoredItem* item = r.add_items();
    item->set_index(i);
    item->set_score(scores[i]);
  }
  return r;
}

TEST(ScoreDiffTest, SameAnswersDifferByNothing) {
  const std::vector<float> s = {0.5f, 0.9f, 0.1f};
  ScoreDiff diff;
  AddComparison(Ranked({1, 0, 2}, s), Ranked({1, 0, 2}, s), 3, 2e-6, &diff);
  EXPECT_EQ(diff.requests, 1);
  EXPECT_EQ(diff.errors, 0);
  EXPECT_EQ(diff.max_abs_diff, 0.0);
  EXPECT_EQ(diff.order_mismatches, 0);
  EXPECT_EQ(diff.near_tie_swaps, 0);
}

TEST(ScoreDiffTest, MeasuresTheLargestScoreDifferenceByCandidate) {
  ScoreDiff diff;
  AddComparison(Ranked({1, 0, 2}, {0.5f, 0.9f, 0.1f}), Ranked({1, 0, 2}, {0.5f, 0.9f, 0.1001f}), 3,
                2e-6, &diff);
  EXPECT_NEAR(diff.max_abs_diff, 1e-4, 1e-6);
}

TEST(ScoreDiffTest, TellsNearTiesFromRealOrderDifferences) {
  const std::vector<float> near = {0.5f, 0.5000001f, 0.1f};
  ScoreDiff ties;
  AddComparison(Ranked({0, 1, 2}, near), Ranked({1, 0, 2}, near), 3, 2e-6, &ties);
  EXPECT_EQ(ties.order_mismatches, 0);
  EXPECT_EQ(ties.near_tie_swaps, 2);
  const std::vector<float> apart = {0.5f, 0.9f, 0.1f};
  ScoreDiff wrong;
  AddComparison(Ranked({0, 1, 2}, apart), Ranked({1, 0, 2}, apart), 3, 2e-6, &wrong);
  EXPECT_EQ(wrong.order_mismatches, 2);
}

TEST(ScoreDiffTest, AnAnswerOfTheWrongShapeIsAnError) {
  const std::vector<float> s = {0.5f, 0.9f, 0.1f};
  ScoreDiff diff;
  AddComparison(Ranked({1, 0}, s), Ranked({1, 0, 2}, s), 3, 2e-6, &diff);     // one missing
  AddComparison(Ranked({1, 1, 2}, s), Ranked({1, 0, 2}, s), 3, 2e-6, &diff);  // repeated
  EXPECT_EQ(diff.requests, 2);
  EXPECT_EQ(diff.errors, 2);
  EXPECT_FALSE(diff.first_error.empty());
}

}  // namespace
}  // namespace fuserank::bench

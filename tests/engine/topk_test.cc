// TopK against a full stable sort written here: score descending, ties by lower index.
#include "engine/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

std::vector<ScoredIndex> ReferenceTopK(const std::vector<float>& scores, int k) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable sort by score descending keeps lower indices first among equal scores.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  std::vector<ScoredIndex> out;
  for (int i = 0; i < std::min<int>(k, order.size()); ++i) {
    out.push_back({static_cast<uint32_t>(order[i]), scores[order[i]]});
  }
  return out;
}

std::vector<ScoredIndex> RunTopK(const std::vector<float>& scores, int k) {
  const int keep = std::max(0, std::min<int>(k, scores.size()));
  std::vector<ScoredIndex> out(keep + 1, ScoredIndex{999999, -7.0f});  // poisoned, +1 guard
  TopK(scores.data(), static_cast<int>(scores.size()), k, out.data());
  EXPECT_EQ(out[keep].index, 999999u) << "wrote past min(k, n)";
  out.resize(keep);
  return out;
}

void ExpectSame(const std::vector<ScoredIndex>& got, const std::vector<ScoredIndex>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, want[i].index) << "rank " << i;
    EXPECT_EQ(got[i].score, want[i].score) << "rank " << i;
  }
}

TEST(TopKTest, EqualScoresComeInIndexOrder) {
  const std::vector<float> scores(10, 0.5f);
  const std::vector<ScoredIndex> top = RunTopK(scores, 4);
  ASSERT_EQ(top.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(top[i].index, i);
}

TEST(TopKTest, TiesBreakByLowerIndexAmongHigherScores) {
  const std::vector<float> scores = {0.1f, 0.9f, 0.3f, 0.9f, 0.9f, 0.3f, 1.0f};
  ExpectSame(RunTopK(scores, 1), {{6, 1.0f}});
  ExpectSame(RunTopK(scores, 3), {{6, 1.0f}, {1, 0.9f}, {3, 0.9f}});
  ExpectSame(RunTopK(scores, 7), ReferenceTopK(scores, 7));
  ExpectSame(RunTopK(scores, 100), ReferenceTopK(scores, 7));
}

TEST(TopKTest, EmptyInputOrZeroKWritesNothing) {
  EXPECT_TRUE(RunTopK({}, 3).empty());
  EXPECT_TRUE(RunTopK({0.5f, 0.2f}, 0).empty());
}

TEST(TopKTest, NanRanksLast) {
  const std::vector<float> scores = {NAN, 0.2f, NAN, 0.7f};
  const std::vector<ScoredIndex> top = RunTopK(scores, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].index, 3u);
  EXPECT_EQ(top[1].index, 1u);
  EXPECT_EQ(top[2].index, 0u);
  EXPECT_EQ(top[3].index, 2u);
}

class TopKSweepTest : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TopKSweepTest, MatchesStableSort) {
  const auto [n, k] = GetParam();
  const uint64_t seed = 1000 + n * 31 + k;
  SCOPED_TRACE(testing::Message() << "seed=" << seed << " n=" << n << " k=" << k);
  std::mt19937_64 rng(seed);
  // Few distinct values so that ties are common.
  std::uniform_int_distribution<int> level(0, std::max(1, n / 4));
  std::vector<float> scores(n);
  for (float& s : scores) s = static_cast<float>(level(rng)) / 16.0f;
  ExpectSame(RunTopK(scores, k), ReferenceTopK(scores, k));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TopKSweepTest,
                         testing::Combine(testing::Values(1, 2, 15, 16, 17, 255, 1000),
                                          testing::Values(1, 2, 10, 16, 1000)));

}  // namespace
}  // namespace fuserank::engine

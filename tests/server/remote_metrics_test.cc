// FetchIncrements: what one metrics update adds to fuserank_remote_fetch_duration_seconds
// for a tier, its seconds counted also when the tier's fetch count has not moved.
#include "server/remote_metrics.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::Each;

RemoteFetchTotals Totals(uint64_t fast, uint64_t slow, double seconds) {
  RemoteFetchTotals totals;
  for (size_t b = 0; b < totals.buckets.size(); ++b)
    totals.buckets[b] = b == 0 ? fast : fast + slow;
  totals.seconds = seconds;
  return totals;
}

TEST(RemoteMetricsTest, FetchIncrementsArePerBucketWithTheSecondsBetween) {
  std::vector<double> increments;
  double seconds = 0;
  ASSERT_TRUE(FetchIncrements(Totals(1, 0, 0.25), Totals(3, 1, 1.0), &increments, &seconds));
  ASSERT_EQ(increments.size(), engine::kFetchBuckets.size() + 1);
  EXPECT_EQ(increments[0], 2.0);
  EXPECT_EQ(increments[1], 1.0);
  EXPECT_DOUBLE_EQ(seconds, 0.75);
  EXPECT_FALSE(FetchIncrements(Totals(3, 1, 1.0), Totals(3, 1, 1.0), &increments, &seconds));
}

// A tier adds a fetch's count before its seconds: one read may see the count, the next only
// the seconds. Those seconds are exported then, not lost.
TEST(RemoteMetricsTest, SecondsThatMovedWithoutANewFetchAreNotLost) {
  std::vector<double> increments;
  double seconds = 0;
  ASSERT_TRUE(FetchIncrements(Totals(3, 1, 1.0), Totals(3, 1, 1.5), &increments, &seconds));
  EXPECT_THAT(increments, Each(0.0));
  EXPECT_DOUBLE_EQ(seconds, 0.5);
}

}  // namespace
}  // namespace fuserank::server

#include "bench/loadgen/window_buckets.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

TEST(BucketNanosTest, ZeroIsNoBuckets) { EXPECT_EQ(*BucketNanos(0, 10), 0); }

TEST(BucketNanosTest, RoundsToNanoseconds) {
  EXPECT_EQ(*BucketNanos(0.3, 1.0), 300000000);
  EXPECT_EQ(*BucketNanos(0.0015, 1.0), 1500000);
  // A bucket longer than the window is the window.
  EXPECT_EQ(*BucketNanos(5, 2.5), 2500000000);
  EXPECT_EQ(*BucketNanos(1e300, 2.5), 2500000000);
}

// Each bucket holds a latency histogram (~115 KB) per thread: --bucket=0.001 over 10 s
// needed ~2.3 GB with one thread, and was taken.
TEST(BucketNanosTest, RefusesMoreThanTheMostBuckets) {
  EXPECT_EQ(*BucketNanos(0.001, 1.0), 1000000);  // exactly kMaxWindowBuckets
  EXPECT_EQ(*BucketNanos(0.01, 10.0), 10000000);
  const absl::StatusOr<int64_t> fine = BucketNanos(0.001, 10.0);
  ASSERT_FALSE(fine.ok());
  EXPECT_EQ(fine.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(fine.status().message());
  EXPECT_NE(message.find("--bucket=0.001"), std::string::npos) << message;
  EXPECT_NE(message.find("--duration"), std::string::npos) << message;
  EXPECT_NE(message.find("10000 buckets; at most 1000"), std::string::npos) << message;
  EXPECT_NE(message.find("--bucket >= 0.01"), std::string::npos) << message;
  EXPECT_FALSE(BucketNanos(0.000999, 1.0).ok());  // 1,002 buckets
}

// A bucket under half a nanosecond was silently no bucket at all.
TEST(BucketNanosTest, RefusesABucketThatRoundsToZero) {
  const absl::StatusOr<int64_t> tiny = BucketNanos(1e-10, 1e-9);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("--bucket=1e-10 rounds to 0 ns"), std::string::npos)
      << tiny.status();
}

TEST(BucketNanosTest, RefusesNegativeAndNotFinite) {
  for (double bucket :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const absl::StatusOr<int64_t> bucket_ns = BucketNanos(bucket, 10);
    ASSERT_FALSE(bucket_ns.ok()) << bucket;
    EXPECT_NE(bucket_ns.status().message().find("--bucket must be finite and >= 0"),
              std::string::npos)
        << bucket_ns.status();
  }
}

TEST(WindowGridTest, LastBucketMayBeShorter) {
  // A window of 1 s from t = 5 s in buckets of 0.3 s: 0, 0.3, 0.6 and 0.9 (0.1 s long).
  const int64_t start = 5000000000;
  const WindowGrid grid(start, start + 1000000000, 300000000);
  ASSERT_EQ(grid.size(), 4);
  EXPECT_EQ(grid.Of(start - 1), -1);
  EXPECT_EQ(grid.Of(start), 0);
  EXPECT_EQ(grid.Of(start + 299999999), 0);
  EXPECT_EQ(grid.Of(start + 300000000), 1);
  EXPECT_EQ(grid.Of(start + 950000000), 3);
  EXPECT_EQ(grid.Of(start + 999999999), 3);
  EXPECT_EQ(grid.Of(start + 1000000000), -1);  // the window is half-open
  const std::vector<WindowBucket> buckets = grid.NewBuckets(nullptr);
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_NEAR(buckets[3].start_s, 0.9, 1e-12);
  EXPECT_EQ(buckets[3].rate, 0);  // closed loop
}

TEST(WindowGridTest, NoBucketsHoldsNothing) {
  const WindowGrid grid(0, 1000, 0);
  EXPECT_EQ(grid.size(), 0);
  EXPECT_EQ(grid.Of(500), -1);
  EXPECT_TRUE(grid.NewBuckets(nullptr).empty());
}

TEST(WindowGridTest, BucketsCarryTheScheduledRateAtTheirStart) {
  const RateSchedule schedule(200, {{200, 0.4}, {800, 0.2}, {200, 0.4}}, 0);
  const WindowGrid grid(0, 1000000000, 200000000);
  const std::vector<WindowBucket> buckets = grid.NewBuckets(&schedule);
  ASSERT_EQ(buckets.size(), 5u);
  const double rates[] = {200, 200, 800, 200, 200};
  for (size_t b = 0; b < buckets.size(); ++b) EXPECT_EQ(buckets[b].rate, rates[b]) << b;
}

TEST(MergeCallsTest, AddsCallsAndKeepsTheSendersFields) {
  WindowBucket into;
  into.start_s = 0.5;
  into.delayed_sends = 2;
  into.max_send_lag_ns = 7;
  into.ok = 1;
  into.latency.Record(100);
  WindowBucket from;
  from.ok = 3;
  from.errors = 1;
  from.completed_ok = 4;
  from.delayed_sends = 100;  // a lane's own bucket never counts sends; ignored
  from.latency.Record(200);
  from.latency.Record(300);
  MergeCalls(from, &into);
  EXPECT_EQ(into.ok, 4);
  EXPECT_EQ(into.errors, 1);
  EXPECT_EQ(into.completed_ok, 4);
  EXPECT_EQ(into.latency.count(), 3);
  EXPECT_EQ(into.latency.max(), 300);
  EXPECT_EQ(into.delayed_sends, 2);
  EXPECT_EQ(into.max_send_lag_ns, 7);
  EXPECT_EQ(into.start_s, 0.5);
}

}  // namespace
}  // namespace fuserank::bench

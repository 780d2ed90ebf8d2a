#include "bench/loadgen/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::vector<int64_t> ProbeValues() {
  std::vector<int64_t> values;
  for (int64_t v = 0; v < 5000; ++v) values.push_back(v);
  for (int bit = 1; bit < 63; ++bit) {
    const int64_t p = int64_t{1} << bit;
    values.insert(values.end(), {p - 1, p, p + 1});
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) values.push_back(static_cast<int64_t>(rng() >> (1 + i % 62)));
  values.push_back(kMax);
  return values;
}

TEST(LatencyHistogramTest, EveryValueLiesInsideItsBucket) {
  for (int64_t v : ProbeValues()) {
    const int i = LatencyHistogram::BucketIndex(v);
    ASSERT_GE(i, 0) << v;
    ASSERT_LT(i, LatencyHistogram::NumBuckets()) << v;
    ASSERT_LE(LatencyHistogram::BucketLowerBound(i), v) << v;
    ASSERT_GE(LatencyHistogram::BucketUpperBound(i), v) << v;
  }
}

TEST(LatencyHistogramTest, BucketsAreContiguousAndNarrow) {
  for (int i = 0; i + 1 < LatencyHistogram::NumBuckets(); ++i) {
    const int64_t lower = LatencyHistogram::BucketLowerBound(i);
    const int64_t upper = LatencyHistogram::BucketUpperBound(i);
    ASSERT_EQ(upper + 1, LatencyHistogram::BucketLowerBound(i + 1)) << i;
    ASSERT_EQ(LatencyHistogram::BucketIndex(lower), i);
    ASSERT_EQ(LatencyHistogram::BucketIndex(upper), i);
    // Width at most 1/256 of the bucket's values: the promised precision.
    ASSERT_LE(static_cast<double>(upper - lower + 1), std::max(1.0, lower / 256.0)) << i;
  }
  EXPECT_EQ(LatencyHistogram::BucketUpperBound(LatencyHistogram::NumBuckets() - 1), kMax);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (int64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 100);
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), 100);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 50);
  EXPECT_EQ(h.ValueAtQuantile(0.99), 99);
  EXPECT_EQ(h.ValueAtQuantile(1.0), 100);
  EXPECT_EQ(h.ValueAtQuantile(0.0), 1);
}

TEST(LatencyHistogramTest, QuantilesMatchSortedSamplesWithinPrecision) {
  const uint64_t seed = 20240601;
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> latency_ns(std::log(2e6), 0.8);  // ~2 ms, long tail
  LatencyHistogram h;
  std::vector<int64_t> samples;
  for (int i = 0; i < 100000; ++i) {
    samples.push_back(static_cast<int64_t>(latency_ns(rng)));
    h.Record(samples.back());
  }
  std::sort(samples.begin(), samples.end());
  for (double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
    const size_t rank = std::max<size_t>(1, static_cast<size_t>(std::ceil(q * samples.size())));
    const int64_t exact = samples[rank - 1];
    const int64_t got = h.ValueAtQuantile(q);
    EXPECT_GE(got, exact) << "q " << q << " seed " << seed;
    EXPECT_LE(got - exact, exact / 256 + 1) << "q " << q << " seed " << seed;
  }
  EXPECT_EQ(h.max(), samples.back());
  EXPECT_EQ(h.min(), samples.front());
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(3);
  LatencyHistogram a, b, all;
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 100000000);
    (i % 3 == 0 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double q : {0.5, 0.9, 0.99, 0.999}) EXPECT_EQ(a.ValueAtQuantile(q), all.ValueAtQuantile(q));
}

TEST(LatencyHistogramTest, EmptyResetAndNegative) {
  LatencyHistogram h;
  EXPECT_EQ(h.ValueAtQuantile(0.99), 0);
  EXPECT_EQ(h.mean(), 0.0);
  h.Record(-5);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.count(), 1);
  h.Record(kMax);
  EXPECT_EQ(h.ValueAtQuantile(1.0), kMax);
  h.Reset();
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 0);
}

}  // namespace
}  // namespace fuserank::bench

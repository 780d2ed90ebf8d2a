// FrequencySketch against exact counts kept in the test: estimates never below the truth
// (exact when nothing collides), TopN on seeded Zipf streams (alpha 1.05 and 1.2, 1M
// draws over 100k rows) matching the true top N, decay fading a row that stopped, and
// memory fixed (no allocation at all) while 10M distinct rows stream through, and the
// memory estimate the budget uses at least what a sketch takes.
#include "engine/hot_rows/frequency_sketch.h"

#include <algorithm>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/engine/hot_rows/zipf_stream_util.h"

namespace fuserank::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<int32_t> Rows(const std::vector<std::pair<int32_t, uint32_t>>& top) {
  std::vector<int32_t> rows;
  for (const auto& [row, count] : top) rows.push_back(row);
  return rows;
}

TEST(FrequencySketchTest, CountsExactlyWithoutCollisionsAndOrdersTopN) {
  FrequencySketch sketch({.width = 1 << 16, .depth = 4, .candidates = 16});
  // Row r * 1000 appears r times (r = 1..10), then 3000 once more: 3000 and 4000 tie at 4.
  for (int32_t r = 1; r <= 10; ++r) {
    for (int i = 0; i < r; ++i) sketch.Observe(r * 1000);
  }
  sketch.Observe(3000);
  EXPECT_EQ(sketch.observed(), 56u);
  for (int32_t r = 1; r <= 10; ++r) {
    EXPECT_EQ(sketch.Estimate(r * 1000), r == 3 ? 4u : static_cast<uint32_t>(r)) << r;
  }
  EXPECT_EQ(sketch.Estimate(12345), 0u);
  EXPECT_THAT(sketch.TopN(4),
              ElementsAre(Pair(10000, 10), Pair(9000, 9), Pair(8000, 8), Pair(7000, 7)));
  // The tie 3000 / 4000 at count 4: lower row first.
  const auto all = sketch.TopN(100);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_THAT(std::vector(all.end() - 4, all.end()),
              ElementsAre(Pair(3000, 4), Pair(4000, 4), Pair(2000, 2), Pair(1000, 1)));
  EXPECT_TRUE(sketch.TopN(0).empty());
}

TEST(FrequencySketchTest, EstimatesNeverFallBelowTheTrueCount) {
  const uint64_t seed = 31;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  // A deliberately small sketch so that rows collide.
  FrequencySketch sketch({.width = 256, .depth = 3, .candidates = 32});
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> row(0, 5000);
  std::vector<uint32_t> truth(5001, 0);
  for (int i = 0; i < 200000; ++i) {
    const int32_t r = row(rng);
    sketch.Observe(r);
    ++truth[r];
  }
  int exact = 0;
  for (int32_t r = 0; r <= 5000; ++r) {
    ASSERT_GE(sketch.Estimate(r), truth[r]) << "row " << r;
    exact += sketch.Estimate(r) == truth[r] ? 1 : 0;
  }
  EXPECT_LT(exact, 5001) << "the sketch is too large to collide: the test proves nothing";
}

class FrequencySketchZipfTest : public ::testing::TestWithParam<std::tuple<double, int>> {};

TEST_P(FrequencySketchZipfTest, TopNConvergesToTheTrueTopN) {
  const auto [alpha, n] = GetParam();
  const uint64_t seed = 4242;
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " alpha " << alpha << " n " << n);
  constexpr int32_t kRows = 100000;
  const std::vector<int32_t> draws = test::ZipfDraws(kRows, alpha, 1'000'000, seed);
  const std::vector<int64_t> counts = test::CountRows(draws, kRows);

  FrequencySketch sketch(FrequencySketch::OptionsForCapacity(n));
  for (const int32_t row : draws) sketch.Observe(row);
  const std::vector<int32_t> top = Rows(sketch.TopN(n));
  ASSERT_EQ(static_cast<int>(top.size()), n);
  const double strict = test::StrictOverlap(counts, top, n);
  const double tie_aware = test::TieAwareOverlap(counts, top, n);
  RecordProperty("strict_overlap", std::to_string(strict));
  std::printf("alpha %.2f n %d: overlap with the true top n %.4f (tie-aware %.4f)\n", alpha, n,
              strict, tie_aware);
  EXPECT_GE(strict, 0.95);
  EXPECT_GE(tie_aware, 0.95);
}

INSTANTIATE_TEST_SUITE_P(AlphasAndSizes, FrequencySketchZipfTest,
                         ::testing::Combine(::testing::Values(1.05, 1.2),
                                            ::testing::Values(100, 1000, 4096)));

TEST(FrequencySketchTest, DecayMakesARowThatStoppedDropOut) {
  FrequencySketch sketch({.width = 1 << 14, .depth = 4, .candidates = 64});
  const int32_t kOld = 777;
  for (int i = 0; i < 10000; ++i) sketch.Observe(kOld);
  // Five rows keep appearing 100 times per period; one Decay per period (as per rebuild).
  int periods_in_top = 0;
  for (int period = 0; period < 20; ++period) {
    for (int32_t r = 0; r < 5; ++r) {
      for (int i = 0; i < 100; ++i) sketch.Observe(r);
    }
    const std::vector<int32_t> top = Rows(sketch.TopN(5));
    const bool old_in_top = std::find(top.begin(), top.end(), kOld) != top.end();
    if (period == 0) {
      EXPECT_EQ(top[0], kOld) << "the old row starts as the hottest";
    }
    if (old_in_top) periods_in_top = period + 1;
    sketch.Decay();
  }
  // 10000 / 2^k falls under the steady ~200 of the others after 6 halvings.
  EXPECT_GE(periods_in_top, 5);
  EXPECT_LE(periods_in_top, 8);
  // Eventually its count decays to 0 and it leaves TopN entirely.
  for (int i = 0; i < 20; ++i) sketch.Decay();
  for (const auto& [row, count] : sketch.TopN(64)) EXPECT_NE(row, kOld);
  EXPECT_EQ(sketch.Estimate(kOld), 0u);
}

TEST(FrequencySketchTest, MemoryStaysFixedOverTenMillionDistinctRows) {
  FrequencySketch sketch(FrequencySketch::OptionsForCapacity(4096));
  const size_t before = sketch.MemoryBytes();
  EXPECT_LT(before, size_t{4} << 20);
  const int32_t kHot = 2'000'000'000;
  int64_t allocations = -1;
  {
    test::ScopedAllocationCounter counter;
    for (int32_t i = 0; i < 10'000'000; ++i) {
      sketch.Observe(i);
      if (i % 100 == 0) sketch.Observe(kHot);  // one hot row among 10M distinct ones
    }
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(sketch.MemoryBytes(), before);
  EXPECT_EQ(sketch.observed(), 10'100'000u);
  const auto top = sketch.TopN(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].first, kHot);
  EXPECT_GE(top[0].second, 100'000u);
}

// cache.hot_rows_per_table takes 0 .. 2^29: the sizing never overflows an int or asks for
// more than the clamped maximum, whatever the capacity.
TEST(FrequencySketchTest, OptionsForAnyCapacityStayInRange) {
  for (const int capacity :
       {std::numeric_limits<int>::min(), -1, 0, 1, 4096, kMaxSketchedCapacity,
        kMaxSketchedCapacity + 1, 1 << 27, 1 << 29, std::numeric_limits<int>::max()}) {
    const FrequencySketch::Options options = FrequencySketch::OptionsForCapacity(capacity);
    EXPECT_GE(options.candidates, 64) << capacity;
    EXPECT_LE(options.candidates, 2 * kMaxSketchedCapacity) << capacity;
    EXPECT_GE(options.candidates,
              std::min<int64_t>(2 * int64_t{std::max(capacity, 0)}, 2 * kMaxSketchedCapacity));
    EXPECT_GE(options.width, 1024) << capacity;
    EXPECT_LE(options.width, 1 << 22) << capacity;
    EXPECT_EQ(options.depth, 4);
  }
  const FrequencySketch largest(FrequencySketch::OptionsForCapacity(kMaxSketchedCapacity));
  EXPECT_LT(largest.MemoryBytes(), size_t{160} << 20);
}

// The memory budget counts a sketch before it exists: the estimate is never below what a
// sketch of those options takes, and not far above it.
TEST(FrequencySketchTest, TheMemoryEstimateCoversWhatASketchTakes) {
  for (const int capacity : {0, 1, 100, 4096, 50'000, kMaxSketchedCapacity}) {
    const FrequencySketch::Options options = FrequencySketch::OptionsForCapacity(capacity);
    const size_t estimate = FrequencySketch::EstimateMemoryBytes(options);
    const size_t taken = FrequencySketch(options).MemoryBytes();
    EXPECT_GE(estimate, taken) << capacity;
    EXPECT_LE(estimate, taken * 2) << capacity;
  }
}

}  // namespace
}  // namespace fuserank::engine

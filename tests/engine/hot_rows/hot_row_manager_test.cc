// HotRowManager semantics: Set replaces only the listed tables, all-or-nothing refusals
// that change neither sets nor version (unknown table, over capacity, reject-oov id,
// duplicate table), version +1 per success, RCU lifetime of old sets, counters that add
// up, and Rebuild from the sketch (exact on a small stream, converging on seeded Zipf
// streams with and without sampling, fading with decay).
#include "engine/hot_rows/hot_row_manager.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "engine/hot_rows/access_sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"
#include "tests/engine/hot_rows/zipf_stream_util.h"

namespace fuserank::engine {
namespace {

using test::HotRows;
using test::MakeHotRowManager;
using test::MakeHotRowTestModel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HotRowManagerTest, StartsEmptyAndReportsEveryTable) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 1), 8);
  EXPECT_EQ(manager->version(), 0u);
  auto status = manager->Get({});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->version, 0u);
  ASSERT_EQ(status->tables.size(), 3u);
  EXPECT_EQ(status->tables[0].table, "user_0");
  EXPECT_EQ(status->tables[2].table, "item_1");
  for (const auto& t : status->tables) {
    EXPECT_EQ(t.hot_rows, 0u);
    EXPECT_EQ(t.capacity, 8u);
    EXPECT_EQ(t.hits + t.misses, 0u);
  }
  EXPECT_EQ(manager->TableIndex("item_0"), 1);
}

TEST(HotRowManagerTest, ContinuesFromTheInitialVersion) {
  HotRowOptions options;
  options.capacity = 4;
  options.initial_version = 41;
  auto manager = HotRowManager::Create(MakeHotRowTestModel(100, 4, DType::kF32, 1), options);
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ((*manager)->version(), 41u);
  EXPECT_EQ((*manager)->snapshot()->version, 41u);
  auto status = (*manager)->Set({{"item_0", {1}}});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->version, 42u);
}

TEST(HotRowManagerTest, RejectsBadOptions) {
  auto model = MakeHotRowTestModel(100, 4, DType::kF32, 1);
  HotRowOptions options;
  options.capacity = -1;
  EXPECT_EQ(HotRowManager::Create(model, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = HotRowOptions();
  options.sample_period = 0;
  EXPECT_EQ(HotRowManager::Create(model, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = HotRowOptions();
  options.sketch = FrequencySketch::Options{.width = 1024, .depth = 9, .candidates = 10};
  EXPECT_EQ(HotRowManager::Create(model, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HotRowManagerTest, SetReplacesListedTablesAndKeepsTheOthers) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 2), 8);
  auto first = manager->Set({{"item_0", {1, 2, 3}}, {"user_0", {50}}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->version, 1u);
  ASSERT_EQ(first->tables.size(), 2u);
  EXPECT_EQ(first->tables[0].table, "item_0");  // call order
  EXPECT_EQ(first->tables[0].hot_rows, 3u);
  EXPECT_EQ(first->tables[1].hot_rows, 1u);

  const auto before = manager->snapshot();
  const std::vector<int64_t> ids = {7, 107};  // one row
  auto second = manager->Set(std::vector<TableIds>{{"item_0", ids}});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->version, 2u);
  EXPECT_THAT(HotRows(*manager, 1), ElementsAre(7));
  EXPECT_THAT(HotRows(*manager, 0), ElementsAre(50));
  // The unchanged table's set is shared, not copied.
  EXPECT_EQ(manager->snapshot()->tables[0], before->tables[0]);
  // An empty call swaps nothing.
  auto none = manager->Set(std::vector<TableIds>{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->version, 2u);
  EXPECT_EQ(manager->version(), 2u);
  // An empty id list clears a table.
  ASSERT_TRUE(manager->Set({{"user_0", {}}}).ok());
  EXPECT_TRUE(HotRows(*manager, 0).empty());
  EXPECT_EQ(manager->version(), 3u);
}

TEST(HotRowManagerTest, RefusedSwapsChangeNothing) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 3), 4);
  ASSERT_TRUE(manager->Set({{"item_0", {1, 2}}, {"item_1", {3}}}).ok());
  const auto before = manager->snapshot();
  ASSERT_EQ(before->version, 1u);

  struct Case {
    std::vector<TableIds> tables;
    absl::StatusCode code;
    std::vector<std::string> words;
  };
  const std::vector<int64_t> ok = {9, 8};
  const std::vector<int64_t> five = {10, 11, 12, 13, 14};
  const std::vector<int64_t> out_of_range = {5, 100};
  const std::vector<Case> cases = {
      {{{"item_0", ok}, {"no_such", ok}},
       absl::StatusCode::kNotFound,
       {"no_such", "user_0, item_0, item_1"}},
      {{{"user_0", ok}, {"item_0", five}},
       absl::StatusCode::kInvalidArgument,
       {"item_0", "5 ids", "capacity 4"}},
      {{{"item_0", ok}, {"item_1", out_of_range}},
       absl::StatusCode::kInvalidArgument,
       {"item_1", "id 100"}},
      {{{"item_0", ok}, {"item_0", ok}}, absl::StatusCode::kInvalidArgument, {"item_0", "twice"}},
      // A name a client sent is escaped in the message (which the admin log prints).
      {{{"a\nb\\c", ok}}, absl::StatusCode::kNotFound, {"no table 'a\\nb\\\\c'"}},
  };
  for (const Case& c : cases) {
    auto result = manager->Set(c.tables);
    ASSERT_EQ(result.status().code(), c.code) << result.status();
    for (const std::string& word : c.words) {
      EXPECT_THAT(result.status().message(), HasSubstr(word));
    }
    EXPECT_EQ(manager->version(), 1u);
    EXPECT_EQ(manager->snapshot(), before) << result.status();
    EXPECT_THAT(HotRows(*manager, 1), ElementsAre(1, 2));
    EXPECT_THAT(HotRows(*manager, 2), ElementsAre(3));
    EXPECT_TRUE(HotRows(*manager, 0).empty());
  }
  const std::vector<std::string> unknown = {"item_0", "nope"};
  EXPECT_EQ(manager->Get(unknown).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager->Rebuild(unknown).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager->snapshot(), before);
}

TEST(HotRowManagerTest, VersionGrowsByOnePerSuccessfulSwap) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 4), 4);
  uint64_t expected = 0;
  for (int i = 0; i < 10; ++i) {
    if (i % 3 == 2) {
      ASSERT_TRUE(manager->Rebuild({}).ok());
    } else {
      ASSERT_TRUE(manager->Set({{"item_0", {i}}}).ok());
    }
    ++expected;
    EXPECT_EQ(manager->version(), expected);
    EXPECT_EQ(manager->snapshot()->version, expected);
    EXPECT_FALSE(manager->Set({{"item_0", {1, 2, 3, 4, 5}}}).ok());
    EXPECT_EQ(manager->version(), expected);
  }
}

TEST(HotRowManagerTest, InFlightSnapshotKeepsTheOldSetUntilReleased) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 5), 4);
  ASSERT_TRUE(manager->Set({{"item_0", {1, 2}}}).ok());
  std::shared_ptr<const HotRowSnapshot> in_flight = manager->snapshot();
  std::weak_ptr<const HotSet> old_set = in_flight->tables[1];
  ASSERT_TRUE(manager->Set({{"item_0", {3}}}).ok());
  EXPECT_THAT(in_flight->table(1).rows(), ElementsAre(1, 2));
  EXPECT_GE(in_flight->table(1).FindSlot(2), 0);
  EXPECT_FALSE(old_set.expired());
  in_flight.reset();
  EXPECT_TRUE(old_set.expired()) << "the old set outlived its last reader";
}

// One writer swaps every ~2 ms while four readers resolve rows through the snapshot and
// compare the bytes with the table's own.
TEST(HotRowManagerTest, CountersAddUpAcrossThreads) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 6), 4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 100000; ++k) manager->RecordLookups(k % 3, 3, 5);
    });
  }
  for (auto& t : threads) t.join();
  auto status = manager->Get(std::vector<std::string>{"item_1", "user_0"});
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->tables.size(), 2u);
  EXPECT_EQ(status->tables[0].table, "item_1");
  EXPECT_EQ(status->tables[0].hits, 4u * 33333 * 3);
  EXPECT_EQ(status->tables[0].misses, 4u * 33333 * 5);
  EXPECT_EQ(status->tables[1].hits, 4u * 33334 * 3);
  // A swap does not reset them.
  ASSERT_TRUE(manager->Set({{"user_0", {1}}}).ok());
  EXPECT_EQ(manager->Get(std::vector<std::string>{"user_0"})->tables[0].misses, 4u * 33334 * 5);
}

TEST(HotRowManagerTest, RebuildInstallsTheMostFrequentRowsHottestFirst) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 7), 3);
  std::vector<int32_t> rows;
  for (const auto& [row, times] :
       std::vector<std::pair<int32_t, int>>{{10, 5}, {20, 3}, {30, 7}, {40, 1}, {50, 2}}) {
    rows.insert(rows.end(), times, row);
  }
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(7));
  manager->ObserveRows(1, rows);
  auto status = manager->Rebuild(std::vector<std::string>{"item_0"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->version, 1u);
  ASSERT_EQ(status->tables.size(), 1u);
  EXPECT_EQ(status->tables[0].hot_rows, 3u);
  EXPECT_THAT(HotRows(*manager, 1), ElementsAre(30, 10, 20));
  EXPECT_TRUE(HotRows(*manager, 0).empty());
  EXPECT_TRUE(HotRows(*manager, 2).empty());
}

TEST(HotRowManagerTest, RowsThatStopAppearingLeaveAfterEnoughRebuilds) {
  auto manager = MakeHotRowManager(MakeHotRowTestModel(100, 4, DType::kF32, 9), 5);
  const std::vector<int32_t> old_burst(10000, 77);
  manager->ObserveRows(1, old_burst);
  int rebuilds_with_old = 0;
  for (int round = 0; round < 15; ++round) {
    std::vector<int32_t> rows;
    for (int32_t r = 0; r < 5; ++r) rows.insert(rows.end(), 100, r);
    manager->ObserveRows(1, rows);
    ASSERT_TRUE(manager->Rebuild({}).ok());
    const std::vector<int32_t> hot = HotRows(*manager, 1);
    if (round == 0) {
      EXPECT_EQ(hot[0], 77);
    }
    if (std::find(hot.begin(), hot.end(), 77) != hot.end()) rebuilds_with_old = round + 1;
  }
  EXPECT_GE(rebuilds_with_old, 5);
  EXPECT_LE(rebuilds_with_old, 8);
  EXPECT_THAT(HotRows(*manager, 1), ::testing::UnorderedElementsAre(0, 1, 2, 3, 4));
}

class HotRowManagerZipfTest : public ::testing::TestWithParam<std::tuple<double, int>> {};

TEST_P(HotRowManagerZipfTest, RebuildThroughSamplersConvergesToTheTrueTopN) {
  const auto [alpha, period] = GetParam();
  const uint64_t seed = 5150;
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << " alpha " << alpha << " period " << period);
  constexpr int32_t kRows = 100000;
  constexpr int kCapacity = 1000;
  const int64_t draws_count = 1'000'000LL * period;
  const std::vector<int32_t> draws = test::ZipfDraws(kRows, alpha, draws_count, seed);
  const std::vector<int64_t> counts = test::CountRows(draws, kRows);
  auto manager =
      MakeHotRowManager(MakeHotRowTestModel(kRows, 4, DType::kF32, 8), kCapacity, period);
  // Two workers, each with its own sampler, flushing once per "batch" of 512 rows.
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      AccessSampler sampler(manager.get(), 4096, seed + w);
      const size_t half = draws.size() / 2;
      for (size_t i = w * half; i < (w + 1) * half; i += 512) {
        sampler.ObserveRows(
            1, absl::MakeConstSpan(draws).subspan(i, std::min<size_t>(512, (w + 1) * half - i)));
        sampler.Flush();
      }
      EXPECT_EQ(sampler.dropped(), 0u);
    });
  }
  for (auto& t : workers) t.join();
  ASSERT_TRUE(manager->Rebuild({}).ok());
  const std::vector<int32_t> hot = HotRows(*manager, 1);
  ASSERT_EQ(static_cast<int>(hot.size()), kCapacity);
  const double strict = test::StrictOverlap(counts, hot, kCapacity);
  const double tie_aware = test::TieAwareOverlap(counts, hot, kCapacity);
  std::printf("alpha %.2f sample 1/%d over %lld draws: overlap %.4f (tie-aware %.4f)\n", alpha,
              period, static_cast<long long>(draws_count), strict, tie_aware);
  // Unsampled: the sketch alone, >= 0.95 (measured 0.999). Sampled: the sample's own counts
  // differ from the true ones near the boundary (measured 0.950 - 0.965 over seeds 1-6 and
  // this one); a biased or aliasing sampler falls far below.
  EXPECT_GE(strict, period == 1 ? 0.95 : 0.93);
}

INSTANTIATE_TEST_SUITE_P(AlphasAndPeriods, HotRowManagerZipfTest,
                         ::testing::Combine(::testing::Values(1.05, 1.2), ::testing::Values(1, 8)));

}  // namespace
}  // namespace fuserank::engine

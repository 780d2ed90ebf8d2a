// HotRowManager: swaps under concurrent readers (bytes through the snapshot bit-identical
// to the table, zero failures), all-or-nothing refusals that change neither sets nor
// version, version +1 per success, RCU lifetime of old sets, counters that add up,
// Rebuild from the sketch (exact on a small stream, converging on Zipf, fading with
// decay), AccessSampler and PeriodicRebuilder.
#include "engine/hot_row_manager.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "engine/access_sampler.h"
#include "engine/hot_row_rebuilder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/zipf_stream_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Tables user_0 (0), item_0 (1) and item_1 (2, oov: reject) of `rows` rows.
std::shared_ptr<const Model> MakeModel(int64_t rows, int dim, DType dtype, uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, rows, dim);
  spec.embedding_dtype = dtype;
  spec.tables[2].oov = Oov::kReject;
  auto model = fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, seed));
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

std::unique_ptr<HotRowManager> MakeManager(std::shared_ptr<const Model> model, int capacity,
                                           int sample_period = 1) {
  HotRowOptions options;
  options.capacity = capacity;
  options.sample_period = sample_period;
  auto manager = HotRowManager::Create(std::move(model), options);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return *std::move(manager);
}

std::vector<int32_t> HotRows(const HotRowManager& manager, int table) {
  const auto rows = manager.snapshot()->table(table).rows();
  return std::vector<int32_t>(rows.begin(), rows.end());
}

TEST(HotRowManagerTest, StartsEmptyAndReportsEveryTable) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 1), 8);
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

TEST(HotRowManagerTest, RejectsBadOptions) {
  auto model = MakeModel(100, 4, DType::kF32, 1);
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
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 2), 8);
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
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 3), 4);
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
      {{{"item_0", ok}, {"no_such", ok}}, absl::StatusCode::kNotFound,
       {"no_such", "user_0, item_0, item_1"}},
      {{{"user_0", ok}, {"item_0", five}}, absl::StatusCode::kInvalidArgument,
       {"item_0", "5 distinct rows", "capacity 4"}},
      {{{"item_0", ok}, {"item_1", out_of_range}}, absl::StatusCode::kInvalidArgument,
       {"item_1", "id 100"}},
      {{{"item_0", ok}, {"item_0", ok}}, absl::StatusCode::kInvalidArgument,
       {"item_0", "twice"}},
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
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 4), 4);
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
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 5), 4);
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
class HotRowManagerConcurrencyTest : public ::testing::TestWithParam<DType> {};

TEST_P(HotRowManagerConcurrencyTest, SwapsUnderReadersNeverChangeABit) {
  const uint64_t seed = 900 + static_cast<int>(GetParam());
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  constexpr int64_t kRows = 5000;
  constexpr int kCapacity = 512;
  const auto model = MakeModel(kRows, 8, GetParam(), seed);
  auto manager = MakeManager(model, kCapacity);
  const absl::Time end = absl::Now() + absl::Milliseconds(1500);
  std::atomic<bool> done{false};
  std::atomic<int64_t> failures{0}, total_hits{0}, total_misses{0}, snapshots{0};
  uint64_t successes = 0;

  std::thread writer([&] {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> id(-2 * kRows, 2 * kRows), size(0, kCapacity);
    std::uniform_int_distribution<int64_t> reject_id(0, kRows - 1);
    const std::vector<std::string> names = {"user_0", "item_0", "item_1"};
    while (absl::Now() < end) {
      std::map<std::string, std::vector<int64_t>> request;
      for (int t = 0; t < 3; ++t) {
        if (rng() % 2 == 0) continue;
        auto& ids = request[names[t]];
        for (int64_t n = size(rng); n > 0; --n) ids.push_back(t == 2 ? reject_id(rng) : id(rng));
      }
      const bool refuse = rng() % 8 == 0;  // an over-capacity table: nothing may change
      if (refuse) {
        auto& ids = request["item_0"];
        ids.clear();
        for (int64_t i = 0; i <= kCapacity; ++i) ids.push_back(i);
      }
      const uint64_t version = manager->version();
      std::vector<TableIds> tables;
      for (const auto& [name, ids] : request) tables.push_back({name, ids});
      auto result = manager->Set(tables);
      if (refuse || request.empty()) {
        EXPECT_EQ(result.ok(), !refuse);
        EXPECT_EQ(manager->version(), version);
      } else {
        EXPECT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(manager->version(), version + 1);
        ++successes;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    done.store(true);
  });

  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(seed * 31 + r);
      std::uniform_int_distribution<int64_t> id(-2 * kRows, 2 * kRows);
      uint64_t last_version = 0;
      while (!done.load()) {
        const std::shared_ptr<const HotRowSnapshot> snapshot = manager->snapshot();
        ++snapshots;
        if (snapshot->version < last_version) ++failures;
        last_version = snapshot->version;
        for (int t = 0; t < 3; ++t) {
          const EmbeddingTable& table = model->tables()[t];
          const HotSet& hot = snapshot->table(t);
          uint64_t hits = 0, misses = 0;
          for (int k = 0; k < 200; ++k) {
            int32_t row = 0;
            if (!MapRow(id(rng), table.rows, table.oov, &row)) continue;
            const int32_t slot = hot.FindSlot(row);
            if (slot < 0) {
              ++misses;
              continue;
            }
            ++hits;
            if (hot.rows()[slot] != row ||
                std::memcmp(hot.slot_data(slot), table.data + row * table.row_bytes,
                            table.row_bytes) != 0) {
              ++failures;
            }
          }
          manager->RecordLookups(t, hits, misses);
          total_hits += hits;
          total_misses += misses;
        }
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(successes, 50u) << "too few swaps to prove anything";
  EXPECT_EQ(manager->version(), successes);
  EXPECT_GT(total_hits.load(), 0);
  EXPECT_GT(snapshots.load(), 100);
  auto status = manager->Get({});
  ASSERT_TRUE(status.ok());
  uint64_t hits = 0, misses = 0;
  for (const auto& t : status->tables) {
    hits += t.hits;
    misses += t.misses;
  }
  EXPECT_EQ(hits, static_cast<uint64_t>(total_hits.load()));
  EXPECT_EQ(misses, static_cast<uint64_t>(total_misses.load()));
}

INSTANTIATE_TEST_SUITE_P(DTypes, HotRowManagerConcurrencyTest,
                         ::testing::Values(DType::kF32, DType::kBF16));

TEST(HotRowManagerTest, CountersAddUpAcrossThreads) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 6), 4);
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
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 7), 3);
  std::vector<int32_t> rows;
  for (const auto& [row, times] : std::vector<std::pair<int32_t, int>>{
           {10, 5}, {20, 3}, {30, 7}, {40, 1}, {50, 2}}) {
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

class HotRowManagerZipfTest : public ::testing::TestWithParam<std::tuple<double, int>> {};

TEST_P(HotRowManagerZipfTest, RebuildThroughSamplersConvergesToTheTrueTopN) {
  const auto [alpha, period] = GetParam();
  const uint64_t seed = 5150;
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " alpha " << alpha << " period "
                                    << period);
  constexpr int32_t kRows = 100000;
  constexpr int kCapacity = 1000;
  const int64_t draws_count = 1'000'000LL * period;
  const std::vector<int32_t> draws = test::ZipfDraws(kRows, alpha, draws_count, seed);
  const std::vector<int64_t> counts = test::CountRows(draws, kRows);
  auto manager = MakeManager(MakeModel(kRows, 4, DType::kF32, 8), kCapacity, period);
  // Two workers, each with its own sampler, flushing once per "batch" of 512 rows.
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      AccessSampler sampler(manager.get(), 4096, seed + w);
      const size_t half = draws.size() / 2;
      for (size_t i = w * half; i < (w + 1) * half; i += 512) {
        sampler.ObserveRows(1, absl::MakeConstSpan(draws).subspan(i, std::min<size_t>(512, (w + 1) * half - i)));
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
  EXPECT_GE(strict, 0.95);
}

INSTANTIATE_TEST_SUITE_P(AlphasAndPeriods, HotRowManagerZipfTest,
                         ::testing::Combine(::testing::Values(1.05, 1.2),
                                            ::testing::Values(1, 8)));

TEST(HotRowManagerTest, RowsThatStopAppearingLeaveAfterEnoughRebuilds) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 9), 5);
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

TEST(AccessSamplerTest, PeriodOneCountsEveryAccess) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 10), 2);
  AccessSampler sampler(manager.get());
  for (int i = 0; i < 30; ++i) sampler.Observe(2, 9);
  const std::vector<int32_t> rows(20, 8);
  sampler.ObserveRows(2, rows);
  sampler.ObserveRows(2, {});
  EXPECT_EQ(sampler.sampled(), 50u);
  sampler.Flush();
  ASSERT_TRUE(manager->Rebuild({}).ok());
  EXPECT_THAT(HotRows(*manager, 2), ElementsAre(9, 8));
}

TEST(AccessSamplerTest, SamplesAboutOneInPeriodWithoutAliasing) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 11), 16, 16);
  AccessSampler sampler(manager.get(), 1 << 16, 3);
  // Row = position mod 16: a sampler with a fixed stride of 16 would only ever see one row.
  std::vector<int32_t> rows(1600);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i % 16);
  for (int k = 0; k < 500; ++k) {
    if (k % 2 == 0) {
      sampler.ObserveRows(1, rows);
    } else {
      for (const int32_t row : rows) sampler.Observe(1, row);
    }
  }
  const double expected = 500.0 * 1600 / 16;
  EXPECT_NEAR(static_cast<double>(sampler.sampled()), expected, 0.03 * expected);
  sampler.Flush();
  ASSERT_TRUE(manager->Rebuild({}).ok());
  EXPECT_EQ(HotRows(*manager, 1).size(), 16u);
}

TEST(AccessSamplerTest, DropsSamplesBeyondItsBufferUntilFlushed) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 12), 4);
  AccessSampler sampler(manager.get(), 8);
  for (int32_t i = 0; i < 20; ++i) sampler.Observe(0, i);
  EXPECT_EQ(sampler.sampled(), 20u);
  EXPECT_EQ(sampler.dropped(), 12u);
  sampler.Flush();
  for (int32_t i = 0; i < 8; ++i) sampler.Observe(0, 99);
  EXPECT_EQ(sampler.dropped(), 12u);
}

TEST(PeriodicRebuilderTest, RebuildsEveryIntervalUntilStopped) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 13), 4);
  const std::vector<int32_t> rows = {5, 5, 5, 6};
  manager->ObserveRows(0, rows);
  std::atomic<int> ok_callbacks{0};
  std::vector<int32_t> first_rows;  // written by the first callback, read after Stop()
  PeriodicRebuilder rebuilder(manager.get(), absl::Milliseconds(10),
                              [&](const absl::StatusOr<HotRowsStatus>& s) {
                                if (!s.ok()) return;
                                if (ok_callbacks.fetch_add(1) == 0) {
                                  first_rows = HotRows(*manager, 0);
                                }
                              });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (rebuilder.rebuilds() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  rebuilder.Stop();
  rebuilder.Stop();  // idempotent
  const int64_t rebuilds = rebuilder.rebuilds();
  EXPECT_GE(rebuilds, 3);
  EXPECT_EQ(ok_callbacks.load(), rebuilds);
  EXPECT_EQ(manager->version(), static_cast<uint64_t>(rebuilds));
  EXPECT_THAT(first_rows, ElementsAre(5, 6));
  // Each rebuild halved the counts (3 -> 1 -> 0, 1 -> 0): both rows have faded.
  EXPECT_TRUE(HotRows(*manager, 0).empty());
}

TEST(PeriodicRebuilderTest, StopsPromptlyDuringALongInterval) {
  auto manager = MakeManager(MakeModel(100, 4, DType::kF32, 14), 4);
  auto rebuilder = std::make_unique<PeriodicRebuilder>(manager.get(), absl::Hours(1));
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time start = absl::Now();
  rebuilder.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(manager->version(), 0u);
}

}  // namespace
}  // namespace fuserank::engine

// HotRowCache: what a new model version takes over from the one it replaces (hot-row
// version, hot sets of tables with the same name and row count, hit and miss counts), the
// warm-up left out of the counts, and the periodic rebuilds of cache.policy: frequency
// (started when serving, paused and resumed).
#include "engine/hot_rows/hot_row_cache.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// user_0 and item_0 (by default 50 rows each, width 4).
std::shared_ptr<const engine::Model> Model(int64_t item_rows = 50,
                                           const std::string& item_name = "item_0") {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 50, 4);
  spec.tables[1].rows = item_rows;
  spec.tables[1].name = item_name;
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      testing::BuildTestModel(testing::MakeRandomModel(spec, 5));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::unique_ptr<HotRowCache> Cache(std::shared_ptr<const engine::Model> model,
                                   const HotRowCache* previous = nullptr,
                                   HotRowCacheOptions options = {}) {
  absl::StatusOr<std::unique_ptr<HotRowCache>> cache =
      HotRowCache::Create("m", std::move(model), options, previous);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return cache.ok() ? std::move(*cache) : nullptr;
}

std::vector<int32_t> HotRows(HotRowCache& cache, const std::string& table) {
  const int index = cache.manager()->TableIndex(table);
  const absl::Span<const int32_t> rows = cache.manager()->snapshot()->table(index).rows();
  return {rows.begin(), rows.end()};
}

engine::TableHotRowsStatus Status(const HotRowCache& cache, const std::string& table) {
  absl::StatusOr<engine::HotRowsStatus> status = cache.Get({table});
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? status->tables[0] : engine::TableHotRowsStatus{};
}

template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(HotRowCacheTest, ANewVersionContinuesTheVersionAndCarriesTheHotSets) {
  std::unique_ptr<HotRowCache> old = Cache(Model());
  old->StartServing(nullptr);
  const std::vector<int64_t> item_ids = {7, 3, 57, 3};  // 57 -> row 7 (modulo): 2 rows
  ASSERT_TRUE(old->Set({{"item_0", item_ids}}).ok());
  ASSERT_TRUE(old->Set({{"user_0", std::vector<int64_t>{9}}}).ok());
  ASSERT_EQ(old->version(), 2u);

  std::unique_ptr<HotRowCache> fresh = Cache(Model(), old.get());
  EXPECT_EQ(fresh->version(), 2u) << "starts where the old one is";
  EXPECT_THAT(HotRows(*fresh, "item_0"), ElementsAre()) << "nothing installed before serving";
  fresh->StartServing(old.get());
  EXPECT_EQ(fresh->version(), 3u) << "one swap for every carried table";
  EXPECT_THAT(HotRows(*fresh, "item_0"), ElementsAre(7, 3)) << "same rows, same slot order";
  EXPECT_THAT(HotRows(*fresh, "user_0"), ElementsAre(9));
  EXPECT_EQ(Status(*fresh, "item_0").hot_rows, 2u);
  EXPECT_EQ(old->version(), 2u) << "the old version is left as it was";
}

TEST(HotRowCacheTest, ChangesToTheOldVersionDuringTheLoadKeepTheVersionGoingUp) {
  std::unique_ptr<HotRowCache> old = Cache(Model());
  old->StartServing(nullptr);
  ASSERT_TRUE(old->Set({{"item_0", std::vector<int64_t>{1}}}).ok());
  std::unique_ptr<HotRowCache> fresh = Cache(Model(), old.get());
  ASSERT_EQ(fresh->version(), 1u);
  // While the new version loads and warms up, the admin plane still changes the old one.
  for (int64_t id : {2, 3, 4}) ASSERT_TRUE(old->Set({{"item_0", std::vector<int64_t>{id}}}).ok());
  ASSERT_EQ(old->version(), 4u);
  fresh->StartServing(old.get());
  EXPECT_EQ(fresh->version(), 5u) << "one swap above the old version, never below it";
  EXPECT_THAT(HotRows(*fresh, "item_0"), ElementsAre(4));
  fresh->CatchUp(*old);
  EXPECT_EQ(fresh->version(), 5u) << "nothing changed since StartServing";

  std::unique_ptr<HotRowCache> empty_old = Cache(Model());
  empty_old->StartServing(nullptr);
  std::unique_ptr<HotRowCache> empty_fresh = Cache(Model(), empty_old.get());
  ASSERT_TRUE(empty_old->Set({{"item_0", std::vector<int64_t>{}}}).ok());
  ASSERT_EQ(empty_old->version(), 1u);
  empty_fresh->StartServing(empty_old.get());
  EXPECT_EQ(empty_fresh->version(), 1u) << "nothing to carry: the old version's number";
}

TEST(HotRowCacheTest, WithoutHotSetsAReloadDoesNotSwap) {
  std::unique_ptr<HotRowCache> old = Cache(Model());
  old->StartServing(nullptr);
  std::unique_ptr<HotRowCache> fresh = Cache(Model(), old.get());
  fresh->StartServing(old.get());
  EXPECT_EQ(fresh->version(), 0u);
}

TEST(HotRowCacheTest, TablesThatChangedRowsOrWentAwayStartEmpty) {
  std::unique_ptr<HotRowCache> old = Cache(Model());
  old->StartServing(nullptr);
  ASSERT_TRUE(
      old->Set({{"item_0", std::vector<int64_t>{1, 2}}, {"user_0", std::vector<int64_t>{4}}}).ok());
  std::unique_ptr<HotRowCache> resized = Cache(Model(/*item_rows=*/60), old.get());
  resized->StartServing(old.get());
  EXPECT_THAT(HotRows(*resized, "item_0"), ElementsAre()) << "60 rows now: ids may map apart";
  EXPECT_THAT(HotRows(*resized, "user_0"), ElementsAre(4));
  EXPECT_EQ(resized->version(), 2u);

  std::unique_ptr<HotRowCache> renamed = Cache(Model(50, "item_new"), resized.get());
  renamed->StartServing(resized.get());
  EXPECT_THAT(HotRows(*renamed, "item_new"), ElementsAre());
  EXPECT_THAT(HotRows(*renamed, "user_0"), ElementsAre(4));
  EXPECT_EQ(renamed->version(), 3u);
}

TEST(HotRowCacheTest, CountsLeaveTheWarmUpOutAndCarryOverByTableName) {
  std::unique_ptr<HotRowCache> old = Cache(Model());
  old->manager()->RecordLookups(1, 100, 100);  // warm-up
  old->StartServing(nullptr);
  EXPECT_EQ(Status(*old, "item_0").hits, 0u);
  old->manager()->RecordLookups(1, 5, 7);
  old->manager()->RecordLookups(0, 1, 2);
  EXPECT_EQ(Status(*old, "item_0").hits, 5u);
  EXPECT_EQ(Status(*old, "item_0").misses, 7u);

  std::unique_ptr<HotRowCache> fresh = Cache(Model(50, "item_new"), old.get());
  fresh->manager()->RecordLookups(0, 40, 40);  // warm-up
  fresh->manager()->RecordLookups(1, 40, 40);
  fresh->StartServing(old.get());
  fresh->manager()->RecordLookups(0, 3, 4);
  fresh->manager()->RecordLookups(1, 3, 4);
  const engine::TableHotRowsStatus user = Status(*fresh, "user_0");
  EXPECT_EQ(user.hits, 1u + 3u);
  EXPECT_EQ(user.misses, 2u + 4u);
  const engine::TableHotRowsStatus item = Status(*fresh, "item_new");
  EXPECT_EQ(item.hits, 3u) << "a new table starts from 0";
  EXPECT_EQ(item.misses, 4u);
  // Set and Rebuild report the same counts.
  absl::StatusOr<engine::HotRowsStatus> set = fresh->Set({{"user_0", std::vector<int64_t>{1}}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->tables[0].hits, 4u);
}

// Requests that finish on a replaced version after the hand-over: their lookups reach the
// successor's counts once the replaced version is destroyed, once, also through a version
// destroyed before the one it replaced.
TEST(HotRowCacheTest, LookupsOfAReplacedVersionAfterTheHandOverArriveWhenItIsDestroyed) {
  std::unique_ptr<HotRowCache> v1 = Cache(Model());
  v1->StartServing(nullptr);
  v1->manager()->RecordLookups(1, 5, 7);
  std::unique_ptr<HotRowCache> v2 = Cache(Model(), v1.get());
  v2->StartServing(v1.get());
  v1->manager()->RecordLookups(1, 4, 1);  // after the hand-over
  EXPECT_EQ(Status(*v2, "item_0").hits, 5u) << "not before v1 is destroyed";
  std::unique_ptr<HotRowCache> v3 = Cache(Model(), v2.get());
  v3->StartServing(v2.get());
  v2->manager()->RecordLookups(1, 10, 0);  // after v2's hand-over
  v2.reset();
  EXPECT_EQ(Status(*v3, "item_0").hits, 15u);
  v1->manager()->RecordLookups(1, 1, 0);
  v1.reset();  // v2 is gone: v1's go on to v3
  const engine::TableHotRowsStatus item = Status(*v3, "item_0");
  EXPECT_EQ(item.hits, 5u + 4u + 10u + 1u);
  EXPECT_EQ(item.misses, 7u + 1u);
}

TEST(HotRowCacheTest, ErrorsAreTheManagersAndChangeNothing) {
  std::unique_ptr<HotRowCache> cache = Cache(Model(), nullptr, HotRowCacheOptions{.capacity = 2});
  cache->StartServing(nullptr);
  ASSERT_TRUE(cache->Set({{"item_0", std::vector<int64_t>{1, 2}}}).ok());
  absl::StatusOr<engine::HotRowsStatus> unknown = cache->Set({{"nope", std::vector<int64_t>{1}}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("user_0, item_0"));
  absl::StatusOr<engine::HotRowsStatus> over =
      cache->Set({{"item_0", std::vector<int64_t>{4, 5, 6}}});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->version(), 1u);
  EXPECT_THAT(HotRows(*cache, "item_0"), ElementsAre(1, 2));
  EXPECT_EQ(cache->Get({"nope"}).status().code(), absl::StatusCode::kNotFound);
}

TEST(HotRowCacheTest, BadOptionsAreRefused) {
  EXPECT_EQ(HotRowCache::Create("m", Model(), HotRowCacheOptions{.capacity = -1}, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  HotRowCacheOptions zero_interval{.frequency = true, .rebuild_interval = absl::ZeroDuration()};
  absl::StatusOr<std::unique_ptr<HotRowCache>> cache =
      HotRowCache::Create("m", Model(), zero_interval, nullptr);
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cache.status().message(), HasSubstr("cache.rebuild_interval_seconds"));
}

TEST(HotRowCacheTest, TheStaticPolicyNeverRebuildsOnItsOwn) {
  std::unique_ptr<HotRowCache> cache = Cache(Model());
  EXPECT_FALSE(cache->samples_accesses());
  cache->StartServing(nullptr);
  cache->ResumeRebuilds();
  EXPECT_FALSE(cache->rebuilds_running());
}

TEST(HotRowCacheTest, TheFrequencyPolicyRebuildsPeriodicallyOnceServing) {
  HotRowCacheOptions options{
      .capacity = 4, .frequency = true, .rebuild_interval = absl::Milliseconds(5)};
  std::unique_ptr<HotRowCache> cache = Cache(Model(), nullptr, options);
  EXPECT_TRUE(cache->samples_accesses());
  EXPECT_FALSE(cache->rebuilds_running()) << "not before it serves";
  const std::vector<int32_t> rows = {11, 11, 11, 12, 12, 13};
  cache->manager()->ObserveRows(1, rows);
  cache->StartServing(nullptr);
  EXPECT_TRUE(cache->rebuilds_running());
  ASSERT_TRUE(Eventually([&] { return cache->version() >= 2; }));
  EXPECT_EQ(cache->Get({}).value().tables.size(), 2u);

  cache->PauseRebuilds();
  EXPECT_FALSE(cache->rebuilds_running());
  const uint64_t paused_at = cache->version();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(cache->version(), paused_at) << "no rebuild while paused";
  cache->ResumeRebuilds();
  EXPECT_TRUE(cache->rebuilds_running());
  EXPECT_TRUE(Eventually([&] { return cache->version() > paused_at; }));
}

TEST(HotRowCacheTest, AFrequencyRebuildInstallsTheObservedTopRows) {
  HotRowCacheOptions options{.capacity = 2, .frequency = true, .rebuild_interval = absl::Hours(1)};
  std::unique_ptr<HotRowCache> cache = Cache(Model(), nullptr, options);
  cache->StartServing(nullptr);
  const std::vector<int32_t> rows = {11, 11, 11, 12, 12, 13};
  cache->manager()->ObserveRows(1, rows);
  absl::StatusOr<engine::HotRowsStatus> rebuilt = cache->Rebuild({"item_0"});
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->version, 1u);
  EXPECT_THAT(HotRows(*cache, "item_0"), ElementsAre(11, 12));
}

// Every value config validation accepts starts cleanly: up to 2^29 with the static policy
// (which allocates no sketch at all), up to 2^20 with the frequency policy.
TEST(HotRowCacheSizingTest, EveryAcceptedCapacityStartsAndOnlyFrequencyHasSketches) {
  HotRowCacheOptions options;
  options.capacity = 1 << 29;
  options.frequency = false;
  std::unique_ptr<HotRowCache> big_static = Cache(Model(), nullptr, options);
  ASSERT_NE(big_static, nullptr);
  EXPECT_EQ(big_static->manager()->SketchMemoryBytes(), 0u);
  EXPECT_EQ(Status(*big_static, "item_0").capacity, 1u << 29);
  absl::StatusOr<engine::HotRowsStatus> rebuilt = big_static->Rebuild({});
  EXPECT_EQ(rebuilt.status().code(), absl::StatusCode::kFailedPrecondition);

  options.capacity = 4096;
  std::unique_ptr<HotRowCache> small_static = Cache(Model(), nullptr, options);
  ASSERT_NE(small_static, nullptr);
  EXPECT_EQ(small_static->manager()->SketchMemoryBytes(), 0u);

  options.frequency = true;
  for (const int capacity : {0, 4096, engine::kMaxSketchedCapacity}) {
    options.capacity = capacity;
    std::unique_ptr<HotRowCache> cache = Cache(Model(), nullptr, options);
    ASSERT_NE(cache, nullptr) << capacity;
    EXPECT_GT(cache->manager()->SketchMemoryBytes(), 0u);
    EXPECT_LT(cache->manager()->SketchMemoryBytes(), size_t{2} * (160 << 20)) << capacity;
  }
  options.capacity = engine::kMaxSketchedCapacity + 1;
  absl::StatusOr<std::unique_ptr<HotRowCache>> refused =
      HotRowCache::Create("m", Model(), options, nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("cache.hot_rows_per_table must be at most 1048576 with cache.policy: "
                        "frequency"));
}

}  // namespace
}  // namespace fuserank::engine

// The CPU engine's hot-row tier: lookups through a hot set are bit-identical to plain
// ones in every dtype and pooling, count every id as a hit or a miss, feed the access
// sampler; the backend reads through the manager's snapshot, reports each batch's
// lookups, keeps scores bit-identical while sets are swapped under concurrent batches,
// and does not allocate per batch after warm-up.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/hot_rows/hot_row_manager.h"
#include "gtest/gtest.h"
#include "tests/engine/alloc_counter_util.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/engine/hot_rows/hot_row_test_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::TestModel;

// Random bags over `rows` rows: `bags` bags of 0..4 ids with random weights.
BagSet RandomBags(int bags, int64_t rows, std::mt19937_64& rng) {
  BagSet set;
  std::uniform_int_distribution<int> size(0, 4);
  std::uniform_int_distribution<int64_t> row(0, rows - 1);
  std::uniform_real_distribution<float> weight(-1.0f, 2.0f);
  for (int b = 0; b < bags; ++b) {
    for (int i = size(rng); i > 0; --i) {
      set.rows.push_back(static_cast<int32_t>(row(rng)));
      set.weights.push_back(weight(rng));
    }
    set.bag_begin.push_back(static_cast<uint32_t>(set.rows.size()));
  }
  return set;
}

// A model of the full variant in `dtype` (300 rows per table) with its test requests.
struct HotBackendFixture {
  TestModel test_model;
  std::shared_ptr<const Model> model;
  std::vector<test::RefRequest> requests;

  HotBackendFixture(DType dtype, uint64_t seed, std::vector<int> sizes) {
    std::mt19937_64 rng(seed);
    ModelSpec spec = test::VariantSpec(Interaction::kDot, dtype, test::Variant::kFull, rng);
    for (TableSpec& table : spec.tables) table.rows = 300;  // room for sets and misses
    auto built = test::BuildVariantModel(spec, seed, rng, &test_model);
    if (!built.ok()) {
      ADD_FAILURE() << built.status();
      return;
    }
    model = *built;
    for (int size : sizes) {
      test::RequestShape shape;
      shape.candidates = size;
      requests.push_back(test::RandomRequest(test_model.spec, shape, rng));
    }
  }
};

class HotLookupTest : public ::testing::TestWithParam<std::tuple<DType, Pooling>> {};

TEST_P(HotLookupTest, BitIdenticalToThePlainLookupAndCountsEveryId) {
  const auto [dtype, pooling] = GetParam();
  const uint64_t seed = 11 + static_cast<int>(dtype) * 7 + static_cast<int>(pooling);
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  HotBackendFixture f(dtype, seed, {});
  ASSERT_NE(f.model, nullptr);
  const int table_index = f.model->item_tables()[0];
  EmbeddingTable table = f.model->tables()[table_index];
  table.pooling = pooling;
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(f.model, 100, 1);

  std::vector<int32_t> hot_rows(std::min<int64_t>(100, table.rows / 2));
  std::uniform_int_distribution<int32_t> any_row(0, static_cast<int32_t>(table.rows - 1));
  for (int32_t& r : hot_rows) r = any_row(rng);
  std::sort(hot_rows.begin(), hot_rows.end());
  hot_rows.erase(std::unique(hot_rows.begin(), hot_rows.end()), hot_rows.end());
  absl::StatusOr<std::shared_ptr<const HotSet>> set = HotSet::FromRows(table, hot_rows, 100);
  ASSERT_TRUE(set.ok()) << set.status();

  const BagSet bags = RandomBags(300, table.rows, rng);
  for (const auto& [first, stride, count] :
       {std::tuple{0, 1, 300}, std::tuple{1, 3, 99}, std::tuple{5, 1, 0}}) {
    SCOPED_TRACE(::testing::Message() << "first=" << first << " stride=" << stride);
    std::vector<float> plain(static_cast<size_t>(std::max(count, 1)) * table.dim, -1.0f);
    std::vector<float> hot(plain.size(), -2.0f);
    PooledLookup(table, bags, first, stride, count, plain.data(), table.dim);
    AccessSampler sampler(manager.get(), 4096, seed);
    uint64_t hits = 0, misses = 0;
    const HotLookup lookup{set->get(), &sampler, table_index, &hits, &misses};
    PooledLookup(table, bags, first, stride, count, hot.data(), table.dim, &lookup);
    if (count > 0) {
      EXPECT_EQ(std::memcmp(plain.data(), hot.data(), plain.size() * sizeof(float)), 0);
    }
    uint64_t want_hits = 0, want_ids = 0;
    for (int k = 0; k < count; ++k) {
      const size_t b = first + static_cast<size_t>(k) * stride;
      for (uint32_t i = bags.bag_begin[b]; i < bags.bag_begin[b + 1]; ++i) {
        ++want_ids;
        want_hits += std::binary_search(hot_rows.begin(), hot_rows.end(), bags.rows[i]) ? 1 : 0;
      }
    }
    EXPECT_EQ(hits, want_hits);
    EXPECT_EQ(misses, want_ids - want_hits);
    EXPECT_GT(count == 0 ? 1 : want_hits, 0u);  // the set is hit at all
    EXPECT_EQ(sampler.sampled(), want_ids);     // period 1: every id

    // An empty set without sampling: the plain loop, every id a miss.
    const std::shared_ptr<const HotSet> empty = HotSet::Empty(table);
    hits = misses = 0;
    const HotLookup empty_lookup{empty.get(), nullptr, table_index, &hits, &misses};
    PooledLookup(table, bags, first, stride, count, hot.data(), table.dim, &empty_lookup);
    if (count > 0) {
      EXPECT_EQ(std::memcmp(plain.data(), hot.data(), plain.size() * sizeof(float)), 0);
    }
    EXPECT_EQ(hits, 0u);
    EXPECT_EQ(misses, want_ids);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypesAndPoolings, HotLookupTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16, DType::kInt8),
                                            ::testing::Values(Pooling::kSum, Pooling::kMean)),
                         [](const auto& info) {
                           return std::string(test::DTypeLabel(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) == Pooling::kSum ? "_sum" : "_mean");
                         });

// Installs a random hot set of up to `capacity` ids in every table.
absl::StatusOr<HotRowsStatus> SwapRandomSets(HotRowManager& manager, int capacity,
                                             std::mt19937_64& rng) {
  const auto& tables = manager.model().tables();
  std::vector<std::vector<int64_t>> ids(tables.size());
  std::vector<TableIds> calls;
  for (size_t t = 0; t < tables.size(); ++t) {
    std::uniform_int_distribution<int64_t> id(0, tables[t].rows - 1);
    ids[t].resize(std::uniform_int_distribution<int>(0, capacity)(rng));
    for (int64_t& v : ids[t]) v = id(rng);
    calls.push_back({tables[t].name, ids[t]});
  }
  return manager.Set(calls);
}

// The manager's status of `tables` (all when empty); a failed Get is a test failure.
HotRowsStatus StatusOf(const HotRowManager& manager, std::vector<std::string> tables = {}) {
  absl::StatusOr<HotRowsStatus> status = manager.Get(tables);
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? *std::move(status) : HotRowsStatus{};
}

void ExpectSameResult(const BatchResult& want, const BatchResult& got) {
  ASSERT_EQ(want.result_begin, got.result_begin);
  ASSERT_EQ(want.items.size(), got.items.size());
  for (size_t i = 0; i < want.items.size(); ++i) {
    ASSERT_EQ(want.items[i].index, got.items[i].index) << "item " << i;
    ASSERT_EQ(std::memcmp(&want.items[i].score, &got.items[i].score, sizeof(float)), 0)
        << "item " << i << ": " << want.items[i].score << " vs " << got.items[i].score;
  }
}

class HotBackendTest : public ::testing::TestWithParam<DType> {};

TEST_P(HotBackendTest, ScoresBitIdenticalAndLookupsCounted) {
  const DType dtype = GetParam();
  const uint64_t seed = 300 + static_cast<int>(dtype);
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  HotBackendFixture f(dtype, seed, {40, 3, 130, 1});
  ASSERT_NE(f.model, nullptr);
  const Batch batch = test::MakeBatch(f.model, f.requests);
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(f.model, 16);

  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    BackendOptions plain_options;
    plain_options.workers = 1;
    plain_options.cpu_threads = threads;
    BackendOptions hot_options = plain_options;
    hot_options.hot_rows = manager.get();
    auto plain = CreateCpuBackend(f.model, plain_options);
    auto hot = CreateCpuBackend(f.model, hot_options);
    BatchResult want, got;
    ASSERT_TRUE(plain->Run(0, batch, &want).ok());
    std::mt19937_64 rng(seed + threads);
    for (int round = 0; round < 4; ++round) {
      ASSERT_TRUE(SwapRandomSets(*manager, 16, rng).ok());
      const HotRowsStatus before = StatusOf(*manager);
      ASSERT_TRUE(hot->Run(0, batch, &got).ok());
      ExpectSameResult(want, got);
      // Every id of the batch is one lookup: a hit exactly when its row is in the set.
      const auto snapshot = manager->snapshot();
      const HotRowsStatus after = StatusOf(*manager);
      for (size_t t = 0; t < f.model->tables().size(); ++t) {
        const bool user = std::count(f.model->user_tables().begin(), f.model->user_tables().end(),
                                     static_cast<int>(t)) > 0;
        const auto& side = user ? f.model->user_tables() : f.model->item_tables();
        const BagSet& bags = user ? batch.user : batch.item;
        const size_t k = std::find(side.begin(), side.end(), static_cast<int>(t)) - side.begin();
        uint64_t hits = 0, ids = 0;
        for (size_t b = k; b < bags.num_bags(); b += side.size()) {
          for (uint32_t i = bags.bag_begin[b]; i < bags.bag_begin[b + 1]; ++i) {
            ++ids;
            hits += snapshot->table(static_cast<int>(t)).FindSlot(bags.rows[i]) >= 0 ? 1 : 0;
          }
        }
        SCOPED_TRACE(::testing::Message() << "table " << f.model->tables()[t].name);
        EXPECT_EQ(after.tables[t].hits - before.tables[t].hits, hits);
        EXPECT_EQ(after.tables[t].misses - before.tables[t].misses, ids - hits);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, HotBackendTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kInt8),
                         [](const auto& info) { return test::DTypeLabel(info.param); });

TEST(HotBackendTest, SwapsUnderConcurrentBatchesNeverChangeAScore) {
  const uint64_t seed = 404;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  HotBackendFixture f(DType::kF32, seed, {64, 7, 200});
  ASSERT_NE(f.model, nullptr);
  const Batch batch = test::MakeBatch(f.model, f.requests);
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(f.model, 32);
  BackendOptions options;
  options.workers = 3;
  options.cpu_threads = 2;
  auto plain = CreateCpuBackend(f.model, {});
  BatchResult want;
  ASSERT_TRUE(plain->Run(0, batch, &want).ok());
  options.hot_rows = manager.get();
  options.sample_accesses = true;
  auto hot = CreateCpuBackend(f.model, options);

  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  std::thread swapper([&] {
    std::mt19937_64 rng(seed);
    while (!stop.load()) {
      if (SwapRandomSets(*manager, 32, rng).ok()) swaps.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> workers;
  std::vector<int> mismatches(3, 0), failures(3, 0);
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      BatchResult got;
      for (int i = 0; i < 60; ++i) {
        if (!hot->Run(w, batch, &got).ok()) {
          ++failures[w];
          continue;
        }
        bool same = got.result_begin == want.result_begin && got.items.size() == want.items.size();
        for (size_t j = 0; same && j < want.items.size(); ++j) {
          same = got.items[j].index == want.items[j].index &&
                 std::memcmp(&got.items[j].score, &want.items[j].score, sizeof(float)) == 0;
        }
        mismatches[w] += same ? 0 : 1;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  stop = true;
  swapper.join();
  EXPECT_GT(swaps.load(), 5);
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(failures[w], 0) << "worker " << w;
    EXPECT_EQ(mismatches[w], 0) << "worker " << w;
  }
  uint64_t lookups = 0;
  for (const TableHotRowsStatus& t : StatusOf(*manager).tables) lookups += t.hits + t.misses;
  EXPECT_GT(lookups, 0u);
}

TEST(HotBackendTest, SampledAccessesLetARebuildFindTheHotRows) {
  const uint64_t seed = 505;
  HotBackendFixture f(DType::kF32, seed, {50});
  ASSERT_NE(f.model, nullptr);
  // Every candidate's bag of the first item table holds row 3 (and nothing else).
  const int item_table = f.model->item_tables()[0];
  for (test::RefCandidate& c : f.requests[0].candidates) c.bags[0] = {{3}, {}};
  const Batch batch = test::MakeBatch(f.model, f.requests);
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(f.model, 4, /*period=*/1);
  BackendOptions options;
  options.workers = 1;
  options.hot_rows = manager.get();
  options.sample_accesses = true;
  auto backend = CreateCpuBackend(f.model, options);
  BatchResult result;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(backend->Run(0, batch, &result).ok());
  const std::string name = f.model->tables()[item_table].name;
  ASSERT_TRUE(manager->Rebuild({name}).ok());
  const std::vector<int32_t> rows = test::HotRows(*manager, item_table);
  ASSERT_EQ(rows.size(), 1u);  // only row 3 was ever read from that table
  EXPECT_EQ(rows[0], 3);
  const HotRowsStatus before = StatusOf(*manager, {name});
  ASSERT_TRUE(backend->Run(0, batch, &result).ok());
  const HotRowsStatus after = StatusOf(*manager, {name});
  EXPECT_EQ(after.tables[0].hits - before.tables[0].hits, 50u);
  EXPECT_EQ(after.tables[0].misses, before.tables[0].misses);
}

TEST(HotBackendTest, RefusesAManagerOfAnotherModel) {
  HotBackendFixture f(DType::kF32, 606, {4});
  HotBackendFixture other(DType::kF32, 607, {4});
  ASSERT_NE(f.model, nullptr);
  ASSERT_NE(other.model, nullptr);
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(other.model, 4);
  BackendOptions options;
  options.hot_rows = manager.get();
  auto backend = CreateCpuBackend(f.model, options);
  BatchResult result;
  const absl::Status status = backend->Run(0, test::MakeBatch(f.model, f.requests), &result);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("another model"), std::string::npos) << status;
}

TEST(HotBackendTest, RunDoesNotAllocateAfterWarmUpWithHotRowsAndSampling) {
  HotBackendFixture f(DType::kF32, 707, {300, 16, 1, 70});
  ASSERT_NE(f.model, nullptr);
  std::unique_ptr<HotRowManager> manager = test::MakeHotRowManager(f.model, 64, 4);
  std::mt19937_64 rng(707);
  ASSERT_TRUE(SwapRandomSets(*manager, 64, rng).ok());
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    BackendOptions options;
    options.workers = 1;
    options.cpu_threads = threads;
    options.hot_rows = manager.get();
    options.sample_accesses = true;
    auto backend = CreateCpuBackend(f.model, options);
    const Batch batch = test::MakeBatch(f.model, f.requests);
    BatchResult result;
    ASSERT_TRUE(backend->Run(0, batch, &result).ok());  // warm-up
    test::ScopedAllocationCounter counter;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(backend->Run(0, batch, &result).ok());
    EXPECT_EQ(counter.count(), 0);
  }
}

}  // namespace
}  // namespace fuserank::engine

// HotSet::FromRemote, the hot set of a storage: redis table, without a cluster: ids are
// found by raw id with their values as given, ids the cluster lacks are left out, more
// ids than the capacity are refused, and the memory estimate (RemoteHotSetBytes) covers
// what a full set takes; EstimateModelMemory counts two such sets per redis table.
#include <cstddef>
#include <cstring>
#include <vector>

#include "engine/hot_rows/frequency_sketch.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model_memory.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

EmbeddingTable RemoteTable(int dim) {
  EmbeddingTable table;
  table.name = "item_1";
  table.dim = dim;
  table.row_bytes = 4 * dim;
  table.remote = true;
  return table;
}

TEST(RemoteHotSetTest, IdsAreFoundWithTheirValuesAndAbsentOnesAreLeftOut) {
  const EmbeddingTable table = RemoteTable(2);
  const std::vector<int64_t> ids = {-5, 1LL << 40, 7};
  std::vector<std::byte> values(3 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::byte>(i);
  absl::StatusOr<std::shared_ptr<const HotSet>> set =
      HotSet::FromRemote(table, ids, values, 8, {true, false, true}, 4);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->size(), 2);
  EXPECT_EQ((*set)->FindId(1LL << 40), -1);
  EXPECT_EQ((*set)->FindId(3), -1);
  ASSERT_EQ((*set)->FindId(-5), 0);
  ASSERT_EQ((*set)->FindId(7), 1);
  EXPECT_EQ(std::memcmp((*set)->slot_data(1), values.data() + 16, 8), 0);
  EXPECT_EQ((*set)->ids()[1], 7);
  EXPECT_EQ((*set)->FindSlot(0), -1);  // no rows: a redis table is addressed by ids

  const absl::Status over =
      HotSet::FromRemote(table, ids, values, 8, {true, true, true}, 2).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument) << over;
}

TEST(RemoteHotSetTest, TheMemoryEstimateCoversAFullSet) {
  for (const int rows : {1, 7, 100, 4096}) {
    const EmbeddingTable table = RemoteTable(16);
    std::vector<int64_t> ids(rows);
    for (int i = 0; i < rows; ++i) ids[i] = int64_t{i} * 7919;
    const std::vector<std::byte> values(static_cast<size_t>(rows) * 64);
    absl::StatusOr<std::shared_ptr<const HotSet>> set =
        HotSet::FromRemote(table, ids, values, 64, std::vector<bool>(rows, true), rows);
    ASSERT_TRUE(set.ok()) << set.status();
    const uint64_t taken = (*set)->MemoryBytes() - sizeof(HotSet);
    EXPECT_GE(RemoteHotSetBytes(rows, 64), taken) << rows;
    EXPECT_LE(RemoteHotSetBytes(rows, 64), taken * 2 + 128) << rows;
  }
  ModelSpec spec = testing::SmallSpec(1, 2, 1000, 16);
  spec.tables[2].storage = Storage::kRedis;
  spec.tables[2].rows = 0;
  ServingShape shape;
  shape.hot_rows_per_table = 0;
  const uint64_t none = EstimateModelMemory(spec, 0, shape).hot_rows;
  EXPECT_EQ(none, 0u);
  shape.hot_rows_per_table = 500;
  ModelSpec local = spec;
  local.tables.pop_back();
  EXPECT_EQ(EstimateModelMemory(spec, 0, shape).hot_rows,
            EstimateModelMemory(local, 0, shape).hot_rows + 2 * RemoteHotSetBytes(500, 64));
}

// A sketch keyed by raw ids tells apart ids that agree in their low 32 bits.
TEST(RemoteHotSetTest, AnIdSketchKeepsWholeIds) {
  IdFrequencySketch sketch(FrequencySketch::OptionsForCapacity(16));
  const int64_t a = (int64_t{1} << 40) + 5;
  const int64_t b = -(int64_t{1} << 40) + 5;
  for (int i = 0; i < 30; ++i) sketch.Observe(a);
  for (int i = 0; i < 20; ++i) sketch.Observe(b);
  for (int i = 0; i < 10; ++i) sketch.Observe(5);
  const std::vector<std::pair<int64_t, uint32_t>> top = sketch.TopN(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0], std::make_pair(a, 30u));
  EXPECT_EQ(top[1], std::make_pair(b, 20u));
  EXPECT_EQ(top[2], std::make_pair(int64_t{5}, 10u));
  const FrequencySketch::Options options = FrequencySketch::OptionsForCapacity(4096);
  EXPECT_GE(IdFrequencySketch::EstimateMemoryBytes(options),
            IdFrequencySketch(options).MemoryBytes());
}

}  // namespace
}  // namespace fuserank::engine

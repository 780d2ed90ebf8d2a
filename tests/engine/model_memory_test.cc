// The memory estimate's hot-row term against hot sets and sketches actually built: two
// full sets per table (capacity rows, or the table's rows when it has fewer) at least as
// large as HotSet::MemoryBytes says, the frequency sketches on top, and nothing for a
// capacity of 0.
#include "engine/model_memory.h"

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "engine/cuda/device_rows.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

// One user table of 50 rows and one item table of 3000 rows, width 8.
ModelSpec TwoTables(DType dtype) {
  ModelSpec spec = testing::SmallSpec(1, 1, 50, 8);
  spec.tables[1].rows = 3000;
  spec.embedding_dtype = dtype;
  return spec;
}

// What two full hot sets of every table take, built for real.
uint64_t BuiltHotSets(const ModelSpec& spec, int capacity) {
  absl::StatusOr<std::shared_ptr<const Model>> model =
      testing::BuildTestModel(testing::MakeRandomModel(spec, 5));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return 0;
  uint64_t bytes = 0;
  for (const EmbeddingTable& table : (*model)->tables()) {
    std::vector<int32_t> rows(std::min<int64_t>(capacity, table.rows));
    std::iota(rows.begin(), rows.end(), 0);
    absl::StatusOr<std::shared_ptr<const HotSet>> set = HotSet::FromRows(table, rows, capacity);
    EXPECT_TRUE(set.ok()) << set.status();
    if (set.ok()) bytes += 2 * ((*set)->MemoryBytes() - sizeof(HotSet));
  }
  return bytes;
}

class HotRowMemoryTest : public ::testing::TestWithParam<DType> {};

TEST_P(HotRowMemoryTest, TwoFullSetsPerTableAreCounted) {
  const ModelSpec spec = TwoTables(GetParam());
  for (const int capacity : {1, 40, 64, 4096}) {
    SCOPED_TRACE(capacity);
    ServingShape shape;
    shape.hot_rows_per_table = capacity;
    const ModelMemory memory = EstimateModelMemory(spec, 0, shape);
    const uint64_t built = BuiltHotSets(spec, capacity);
    EXPECT_GE(memory.hot_rows, built);
    EXPECT_LE(memory.hot_rows, built + built / 4 + 1024);
    ServingShape none = shape;
    none.hot_rows_per_table = 0;
    const ModelMemory without = EstimateModelMemory(spec, 0, none);
    EXPECT_EQ(without.hot_rows, 0u);
    EXPECT_EQ(memory.total(), without.total() + memory.hot_rows);
    EXPECT_TRUE(absl::StrContains(memory.Breakdown(), "hot rows ")) << memory.Breakdown();
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, HotRowMemoryTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16));

TEST(HotRowMemoryTest, TheFrequencyPolicyAddsASketchPerTable) {
  const ModelSpec spec = TwoTables(DType::kF32);
  ServingShape shape;
  shape.hot_rows_per_table = 4096;
  const ModelMemory sets = EstimateModelMemory(spec, 0, shape);
  shape.frequency_sketches = true;
  const ModelMemory sketched = EstimateModelMemory(spec, 0, shape);
  const FrequencySketch sketch(FrequencySketch::OptionsForCapacity(4096));
  EXPECT_GE(sketched.hot_rows - sets.hot_rows, 2 * sketch.MemoryBytes());
}

TEST(HotRowMemoryTest, AnAbsurdCapacityOfHugeTablesSaturatesInsteadOfWrapping) {
  ModelSpec spec = TwoTables(DType::kF32);
  for (TableSpec& t : spec.tables) {
    t.rows = int64_t{1} << 40;
    t.dim = 1 << 20;
  }
  ServingShape shape;
  shape.hot_rows_per_table = 1 << 29;
  const ModelMemory memory = EstimateModelMemory(spec, 0, shape);
  EXPECT_GE(memory.hot_rows, uint64_t{1} << 50);
}

// cache.placement: host: the CUDA backend's page-locked copy of the tables in their device
// row layout, what DeviceModel::Upload allocates (engine/cuda/device_rows.h).
TEST(PinnedTableMemoryTest, HostPlacementCountsEveryTableInItsDeviceRowLayout) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kInt8}) {
    SCOPED_TRACE(static_cast<int>(dtype));
    const ModelSpec spec = TwoTables(dtype);
    std::mt19937_64 rng(5);
    testing::TestModel test_model;
    absl::StatusOr<std::shared_ptr<const Model>> model =
        test::BuildVariantModel(spec, 5, rng, &test_model);  // int8: codes and qparams
    ASSERT_TRUE(model.ok()) << model.status();
    uint64_t device_rows = 0;
    for (const EmbeddingTable& table : (*model)->tables()) {
      device_rows += static_cast<uint64_t>(table.rows) * cuda::DeviceRowBytes(table);
    }
    ServingShape shape;
    const ModelMemory device = EstimateModelMemory(spec, 0, shape);
    shape.host_tables = true;
    const ModelMemory host = EstimateModelMemory(spec, 0, shape);
    EXPECT_EQ(device.pinned_tables, 0u);
    EXPECT_EQ(host.pinned_tables, device_rows);
    EXPECT_EQ(host.total(), device.total() + device_rows);
    EXPECT_TRUE(absl::StrContains(host.Breakdown(), ", pinned tables ")) << host.Breakdown();
    EXPECT_FALSE(absl::StrContains(device.Breakdown(), "pinned")) << device.Breakdown();
  }
}

}  // namespace
}  // namespace fuserank::engine

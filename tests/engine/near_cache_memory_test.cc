// The memory estimate's near-cache term: NearCacheBytes is never below what a NearCache of
// those sizes holds (NearCache::MemoryBytes) and not far above it, and EstimateModelMemory
// counts one near cache of remote.near_cache_rows rows per storage: redis table, none for
// local tables or a near cache of 0 rows, and names it in the breakdown.
#include <chrono>
#include <cstdint>

#include "absl/strings/match.h"
#include "engine/model_memory.h"
#include "engine/near_cache.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

TEST(NearCacheMemoryTest, TheEstimateCoversWhatANearCacheTakes) {
  for (const uint64_t rows : {1, 5, 16, 17, 100, 4096, 65536, 100'003}) {
    for (const uint64_t row_bytes : {2, 32, 264}) {
      const NearCache cache(rows, row_bytes, std::chrono::milliseconds(10));
      const uint64_t taken = cache.MemoryBytes();
      const uint64_t estimate = NearCacheBytes(rows, row_bytes);
      EXPECT_GE(estimate, taken) << rows << " x " << row_bytes;
      EXPECT_LE(estimate, taken * 2) << rows << " x " << row_bytes;
      // The slabs alone: never counted short of rows x row_bytes.
      EXPECT_GE(estimate, rows * row_bytes);
    }
  }
  EXPECT_EQ(NearCacheBytes(0, 64), 0u);
  EXPECT_EQ(NearCache(0, 64, std::chrono::milliseconds(10)).MemoryBytes(), 0u);
}

TEST(NearCacheMemoryTest, EveryRedisTableCountsOneNearCache) {
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kInt8}) {
    ModelSpec spec = testing::SmallSpec(1, 2, 1000, 16);
    spec.embedding_dtype = dtype;
    ServingShape shape;
    shape.near_cache_rows = 50'000;
    const ModelMemory local = EstimateModelMemory(spec, 0, shape);
    EXPECT_EQ(local.near_cache, 0u);
    EXPECT_FALSE(absl::StrContains(local.Breakdown(), "near cache")) << local.Breakdown();

    for (const int t : {1, 2}) {
      spec.tables[t].storage = Storage::kRedis;
      spec.tables[t].rows = 0;
    }
    const ModelMemory remote = EstimateModelMemory(spec, 0, shape);
    const uint64_t row_bytes =
        dtype == DType::kInt8 ? 16 + 8 : 16 * (dtype == DType::kF32 ? 4 : 2);  // int8: + qparams
    EXPECT_EQ(remote.near_cache, 2 * NearCacheBytes(50'000, row_bytes));
    EXPECT_GE(remote.near_cache, uint64_t{2} * 50'000 * row_bytes);
    EXPECT_EQ(remote.total() - remote.near_cache, EstimateModelMemory(spec, 0, {}).total());
    EXPECT_TRUE(absl::StrContains(remote.Breakdown(), "near cache ")) << remote.Breakdown();

    shape.near_cache_rows = 0;
    EXPECT_EQ(EstimateModelMemory(spec, 0, shape).near_cache, 0u);
  }
}

}  // namespace
}  // namespace fuserank::engine

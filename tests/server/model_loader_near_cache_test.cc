// PrepareModelVersion's memory check counts the near cache of a model's storage: redis
// tables: a version that fits the budget with remote.near_cache_rows: 0 is refused at
// start once the near cache adds rows x (row bytes + overhead) per redis table, with the
// budget's message naming the near cache and model.memory_budget_bytes. No cluster is
// needed: the check runs before anything connects.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

TEST(ModelLoaderBudgetTest, TheNearCacheIsCountedInTheMemoryBudget) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/model_loader_near_cache_", getpid());
  std::filesystem::remove_all(dir);
  engine::ModelSpec spec = testing::SmallSpec(1, 2, 1000, 32);
  spec.name = "m";
  spec.weights_path = "m.safetensors";
  testing::TestModel model = testing::MakeRandomModel(spec, 1);
  model.spec.tables[2].storage = engine::Storage::kRedis;  // item_1 in the cluster
  model.spec.tables[2].rows = 0;
  model.weights.erase("embeddings.item_1.weight");
  model.shapes.erase("embeddings.item_1.weight");
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  ASSERT_TRUE(path.ok()) << path.status();

  ModelLoaderOptions options;
  options.cache.capacity = 0;
  options.remote.near_cache_rows = 0;
  absl::StatusOr<PreparedVersion> bare = PrepareModelVersion("", *path, options);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->memory.near_cache, 0u);

  options.remote.near_cache_rows = 100'000;  // 100000 rows x 128 bytes: over 12 MiB
  absl::StatusOr<PreparedVersion> cached = PrepareModelVersion("", *path, options);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->memory.near_cache, engine::NearCacheBytes(100'000, 128));
  EXPECT_EQ(cached->memory.total(), bare->memory.total() + cached->memory.near_cache);

  // A budget the version fits without its near cache, but not with it.
  options.budget = std::make_shared<MemoryBudget>(bare->memory.total() + 1024);
  const absl::Status refused = PrepareModelVersion("", *path, options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("near cache "));
  EXPECT_THAT(refused.message(), HasSubstr("model.memory_budget_bytes"));
  options.remote.near_cache_rows = 0;
  EXPECT_TRUE(PrepareModelVersion("", *path, options).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fuserank::server

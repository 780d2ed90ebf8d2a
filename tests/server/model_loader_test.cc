// PrepareModelVersion's memory check counts the hot-row cache: a version that fits the
// budget without hot rows is refused once cache.hot_rows_per_table adds two full hot sets
// per table, with the budget's message naming the hot rows and model.memory_budget_bytes.
#include "server/model_loader.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

TEST(ModelLoaderBudgetTest, TheHotRowCacheIsCountedInTheMemoryBudget) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/model_loader_budget_", getpid());
  std::filesystem::remove_all(dir);
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 20000, 32);
  spec.name = "m";
  spec.weights_path = "m.safetensors";
  absl::StatusOr<std::string> path =
      testing::WriteTestModel(testing::MakeRandomModel(spec, 1), dir);
  ASSERT_TRUE(path.ok()) << path.status();

  ModelLoaderOptions options;
  options.cache.capacity = 0;
  absl::StatusOr<PreparedVersion> bare = PrepareModelVersion("", *path, options);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->memory.hot_rows, 0u);

  options.cache.capacity = 16384;  // 2 x 16384 rows x 128 bytes x 2 tables: over 8 MiB
  absl::StatusOr<PreparedVersion> cached = PrepareModelVersion("", *path, options);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_GE(cached->memory.hot_rows, uint64_t{2} * 16384 * 128 * 2);
  EXPECT_EQ(cached->memory.total(), bare->memory.total() + cached->memory.hot_rows);

  // A budget the version fits without its hot rows, but not with them.
  options.budget = std::make_shared<MemoryBudget>(bare->memory.total() + 1024);
  const absl::Status refused = PrepareModelVersion("", *path, options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("hot rows "));
  EXPECT_THAT(refused.message(), HasSubstr("model.memory_budget_bytes"));
  options.cache.capacity = 0;
  EXPECT_TRUE(PrepareModelVersion("", *path, options).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fuserank::server

// PrepareModelVersion's memory check counts the hot-row cache: a version that fits the
// budget without hot rows is refused once cache.hot_rows_per_table adds two full hot sets
// per table, with the budget's message naming the hot rows and model.memory_budget_bytes.
// Misaligned tables a load copies again are counted too. The weights path a version records
// for the file watch follows the spec as it was read.
#include "server/model_loader.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_files.h"
#include "tests/testing/int8_layout_model.h"
#include "tests/testing/temp_dir.h"
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

// A weights file whose int8 qparams lie misaligned (an odd-sized I8 table before them)
// costs a second copy of them when loaded: the budget reserves it. The audit's 8M-row
// model took 437 MB against the 312 MB of its aligned twin under one logged estimate.
TEST(ModelLoaderBudgetTest, MisalignedTablesCopiedAreCountedInTheMemoryBudget) {
  const std::string dir = testing::MakeTempDir("model_loader_misaligned");
  std::filesystem::create_directories(dir + "/aligned");
  const int64_t rows = 100001;
  const uint64_t qparams = 2 * 8 * static_cast<uint64_t>(rows);
  const std::string aligned_path = testing::WriteInt8LayoutModel(dir + "/aligned", rows, false);
  const std::string path = testing::WriteInt8LayoutModel(dir, rows, /*misaligned=*/true);
  ModelLoaderOptions options;
  options.cache.capacity = 0;
  absl::StatusOr<PreparedVersion> aligned = PrepareModelVersion("", aligned_path, options);
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  EXPECT_EQ(aligned->memory.copies, 0u);
  absl::StatusOr<PreparedVersion> misaligned = PrepareModelVersion("", path, options);
  ASSERT_TRUE(misaligned.ok()) << misaligned.status();
  EXPECT_EQ(misaligned->memory.copies, qparams);
  EXPECT_GE(misaligned->memory.total(), aligned->memory.total() + qparams - 1024)
      << "the two files differ only in their headers' offsets";
  EXPECT_THAT(misaligned->memory.Breakdown(), HasSubstr("misaligned tables copied"));

  // A budget the aligned file fits, but not the misaligned one with its copies.
  options.budget = std::make_shared<MemoryBudget>(aligned->memory.total() + 1024);
  EXPECT_TRUE(PrepareModelVersion("", aligned_path, options).ok());
  const absl::Status refused = PrepareModelVersion("", path, options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("misaligned tables copied"));
}

// The weights path a version records for the file watch is under the configured directory
// only when that directory is the one the spec was read from (a directory symlink, to be
// followed when switched); a spec file that is itself a symlink names the weights beside its
// target, not a path beside the link where no file is. The watch computes the same path
// (NamedWeightsPath), or it would see a change at every poll.
TEST(ModelLoaderNamesTest, TheWatchedWeightsPathIsWhereTheSpecReadNamesIt) {
  const std::string dir = std::filesystem::weakly_canonical(
                              absl::StrCat(::testing::TempDir(), "/model_loader_names_", getpid()))
                              .string();
  std::filesystem::remove_all(dir);
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 10, 4);
  spec.name = "m";
  spec.weights_path = "m.safetensors";
  ASSERT_TRUE(testing::WriteTestModel(testing::MakeRandomModel(spec, 1), dir + "/store").ok());
  std::filesystem::create_directories(dir + "/models");
  std::filesystem::create_symlink("../store/m.yaml", dir + "/models/m.yaml");
  std::filesystem::create_directory_symlink(dir + "/store", dir + "/live");
  for (const bool confined : {false, true}) {
    SCOPED_TRACE(confined ? "with roots" : "without roots");
    ModelLoaderOptions options;
    if (confined) {
      options.roots = std::make_shared<const ModelRoots>(std::vector<std::string>{dir});
    }
    absl::StatusOr<PreparedVersion> linked =
        PrepareModelVersion("", dir + "/models/m.yaml", options);
    ASSERT_TRUE(linked.ok()) << linked.status();
    EXPECT_EQ(linked->weights_as_named, dir + "/store/m.safetensors");
    EXPECT_EQ(NamedWeightsPath(dir + "/models/m.yaml").value_or(""), linked->weights_as_named);
    absl::StatusOr<PreparedVersion> live = PrepareModelVersion("", dir + "/live/m.yaml", options);
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_EQ(live->weights_as_named, dir + "/live/m.safetensors");
    EXPECT_EQ(NamedWeightsPath(dir + "/live/m.yaml").value_or(""), live->weights_as_named);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fuserank::server

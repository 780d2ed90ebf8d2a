// ServedModels and the hot-row sets: a reload carries the serving version's sets and their
// version over, a change names its model and runs on that model's current version, and a
// change made while the model reloads neither waits for the load nor is lost.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "server/served_models.h"
#include "tests/server/served_models_util.h"

namespace fuserank::server {
namespace {

using test::CpuOptions;
using test::FileLoader;
using test::ServedModelsTest;
using ::testing::HasSubstr;

TEST_F(ServedModelsTest, AReloadCarriesTheHotSetsAndTheirVersionOver) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  const std::vector<int64_t> ids = {4, 8, 15};
  absl::StatusOr<engine::HotRowsStatus> set;
  ASSERT_TRUE(models
                  .ChangeServingVersion("",
                                        [&](const ServedModel& v) {
                                          set = v.hot_rows->Set({{"item_0", ids}});
                                          return set.status();
                                        })
                  .ok());
  ASSERT_EQ(set->version, 1u);
  ASSERT_TRUE(models.Reload("", v2_path_).ok());
  ModelHandle v2 = *models.Acquire("");
  EXPECT_EQ(v2->version(), "v2");
  absl::StatusOr<engine::HotRowsStatus> now = v2->hot_rows->Get({"item_0"});
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->version, 2u);
  EXPECT_EQ(now->tables[0].hot_rows, 3u);
  // A refused version leaves the serving one's sets and version alone.
  EXPECT_FALSE(models.Reload("", dir_ + "/nowhere.yaml").ok());
  EXPECT_EQ((*models.Acquire(""))->hot_rows->version(), 2u);
}

TEST_F(ServedModelsTest, ChangeServingVersionRunsOnTheCurrentVersionOfTheNamedModel) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  std::string seen;
  ASSERT_TRUE(models
                  .ChangeServingVersion("other",
                                        [&](const ServedModel& v) {
                                          seen = v.name;
                                          return absl::OkStatus();
                                        })
                  .ok());
  EXPECT_EQ(seen, "other");
  const absl::Status refused = models.ChangeServingVersion(
      "", [](const ServedModel&) { return absl::InvalidArgumentError("no"); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  const absl::Status missing =
      models.ChangeServingVersion("nope", [](const ServedModel&) { return absl::OkStatus(); });
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("loaded models: m, other"));
}

// A hot-set change of the model being reloaded neither waits for the load nor is lost: it
// goes to the serving version at once, and the new version takes it over before the swap
// (an emptied set too), its hot-row version past the serving one's.
TEST_F(ServedModelsTest, HotSetChangesDuringAReloadDoNotWaitAndAreTakenOver) {
  absl::Notification built, release;
  std::atomic<int> loads{0};
  VersionLoader loader = [&](const std::string& name, const std::string& path,
                             const ServedModel* previous) {
    auto version = LoadModelVersion(name, path, CpuOptions(), previous);
    if (loads.fetch_add(1) == 1) {  // the reload stalls once its version is built
      built.Notify();
      release.WaitForNotification();
    }
    return version;
  };
  ServedModels models(loader);
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  auto set = [&](const std::string& table, std::vector<int64_t> ids) {
    return models.ChangeServingVersion("", [&](const ServedModel& v) {
      return v.hot_rows->Set({{table, ids}}).status();
    });
  };
  ASSERT_TRUE(set("item_0", {1, 2}).ok());
  std::thread reload([&] { EXPECT_TRUE(models.Reload("", v2_path_).ok()); });
  built.WaitForNotification();
  absl::Notification changed;
  std::thread change([&] {
    EXPECT_TRUE(set("item_0", {}).ok());
    EXPECT_TRUE(set("user_0", {3}).ok());
    changed.Notify();
  });
  const bool in_time = changed.WaitForNotificationWithTimeout(absl::Seconds(60));
  release.Notify();  // lets a change that waits for the reload go on, so the test ends
  change.join();
  reload.join();
  EXPECT_TRUE(in_time) << "the hot-set changes waited for the reload";
  ModelHandle v2 = *models.Acquire("");
  ASSERT_EQ(v2->version(), "v2");
  absl::StatusOr<engine::HotRowsStatus> now = v2->hot_rows->Get({"item_0", "user_0"});
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->tables[0].hot_rows, 0u);  // emptied while v2 loaded
  EXPECT_EQ(now->tables[1].hot_rows, 1u);
  EXPECT_GT(now->version, 3u);  // v1 was at 3 (one set before, two during the reload)
}

}  // namespace
}  // namespace fuserank::server

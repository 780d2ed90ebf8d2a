// ServedModels: the default model, lookup by name, NOT_FOUND naming the loaded models
// (and the caller's field to leave empty), decoders that name the model as served,
// reloads that swap a version in while holders of the old one finish on it, the old
// version freed once its last holder (here a request completing on a batcher thread) lets
// go, and the model-info series of a retired version dropped. Refused versions:
// served_models_refusal_test.cc; hot sets across reloads: served_models_hot_rows_test.cc.
#include "server/served_models.h"

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "tests/server/served_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using test::CpuOptions;
using test::Eventually;
using test::FileLoader;
using test::Request;
using test::ServedModelsTest;
using test::Version;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(ServedModelsTest, TheFirstModelIsTheDefaultUnlessOneIsMarked) {
  ServedModels first(FileLoader());
  ASSERT_TRUE(first.Load("", v1_path_, false).ok());
  ASSERT_TRUE(first.Load("", other_path_, false).ok());
  EXPECT_EQ(first.default_name(), "m");
  EXPECT_EQ((*first.Acquire(""))->name, "m");

  ServedModels marked(FileLoader());
  ASSERT_TRUE(marked.Load("", v1_path_, false).ok());
  ASSERT_TRUE(marked.Load("", other_path_, true).ok());
  EXPECT_EQ(marked.default_name(), "other");
  absl::StatusOr<ModelHandle> handle = marked.Acquire("");
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ((*handle)->name, "other");
  EXPECT_EQ((*handle)->version(), "o1");
}

TEST_F(ServedModelsTest, PicksAModelByNameAndNamesOverrideTheSpec) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("ranker-a", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  absl::StatusOr<ModelHandle> a = models.Acquire("ranker-a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->version(), "v1");
  absl::StatusOr<ModelHandle> other = models.Acquire("other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ((*other)->version(), "o1");
  EXPECT_EQ((*other)->path, other_path_);
  EXPECT_FALSE(models.Acquire("m").ok()) << "the configured name replaces the spec's";
}

TEST_F(ServedModelsTest, AnUnknownNameIsNotFoundListingTheLoadedModels) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  absl::StatusOr<ModelHandle> missing = models.Acquire("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      missing.status().message(),
      AllOf(HasSubstr("'nope'"), HasSubstr("loaded models: m, other"), HasSubstr("default, 'm'")));
  absl::StatusOr<ReloadResult> reload = models.Reload("nope", "");
  EXPECT_EQ(reload.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServedModelsTest, TheNotFoundHintNamesTheCallersField) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  EXPECT_THAT(models.Acquire("nope").status().message(),
              HasSubstr("(leave `model` empty for the default, 'm')"));
  EXPECT_THAT(models.Acquire("nope", "model_name").status().message(),
              HasSubstr("(leave `model_name` empty for the default, 'm')"));
}

// A decoder's messages name the model as requests address it, in every version.
TEST_F(ServedModelsTest, DecodersNameTheModelByItsServedName) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("ranker-a", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  v1::RankRequest request = Request();
  request.add_user_features()->set_name("nope");
  auto message = [&](const std::string& name) {
    absl::StatusOr<ModelHandle> handle = models.Acquire(name);
    EXPECT_TRUE(handle.ok()) << handle.status();
    if (!handle.ok()) return std::string();
    EXPECT_EQ((*handle)->decoder->model_name(), name);
    engine::Batch batch;
    return std::string((*handle)->decoder->Append(request, &batch).message());
  };
  EXPECT_THAT(message("ranker-a"), HasSubstr("model 'ranker-a' has no table named 'nope'"));
  EXPECT_THAT(message("other"), HasSubstr("model 'other' has no table named 'nope'"));
  ASSERT_TRUE(models.Reload("ranker-a", v2_path_).ok());
  EXPECT_EQ((*models.Acquire("ranker-a"))->version(), "v2");
  EXPECT_THAT(message("ranker-a"), HasSubstr("model 'ranker-a' has no table named 'nope'"));
}

TEST_F(ServedModelsTest, RefusesTwoModelsOfOneNameAndTwoDefaults) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, true).ok());
  EXPECT_EQ(models.Load("", v2_path_, false).code(), absl::StatusCode::kAlreadyExists);
  const absl::Status second_default = models.Load("", other_path_, true);
  EXPECT_EQ(second_default.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second_default.message(), HasSubstr("both marked as the default"));
}

TEST_F(ServedModelsTest, ReloadSwapsInTheNewVersionWhileHoldersKeepTheOld) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  absl::StatusOr<ModelHandle> old = models.Acquire("m");
  ASSERT_TRUE(old.ok());
  std::weak_ptr<const engine::Model> old_model = (*old)->model;

  absl::StatusOr<ReloadResult> result = models.Reload("m", v2_path_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->model, "m");
  EXPECT_EQ(result->version, "v2");
  EXPECT_EQ(result->previous_version, "v1");
  EXPECT_THAT(result->message, AllOf(HasSubstr("'v2'"), HasSubstr("retired")));
  EXPECT_EQ((*models.Acquire(""))->version(), "v2");
  EXPECT_EQ((*models.Acquire(""))->path, v2_path_) << "the new path is the model's path now";
  EXPECT_EQ((*old)->version(), "v1") << "a holder keeps the version it acquired";
  EXPECT_FALSE(old_model.expired());

  old->reset();
  // The reaper counts the version once all of it is destroyed, just after the model expires.
  EXPECT_TRUE(Eventually([&] { return old_model.expired() && models.versions_freed() == 1; }))
      << "the old version is freed once its last holder lets go";
  EXPECT_EQ(models.versions_freed(), 1);
}

// A version that takes other inputs loads (the operator's call), and the reload's message
// says what changed for clients; one with the same inputs says nothing of them.
TEST_F(ServedModelsTest, AReloadToOtherInputsSaysWhatClientsMustChange) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  absl::StatusOr<ReloadResult> same = models.Reload("m", v2_path_);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_THAT(same->message, Not(HasSubstr("inputs differ")));
  // v2: user_0, item_0, 2 user dense values. v3: user_0, user_1, item_1, 5.
  engine::ModelSpec spec = fuserank::testing::SmallSpec(2, 2, 50, 4);
  spec.tables.erase(spec.tables.begin() + 2);  // item_0
  spec.name = "m";
  spec.version = "v3";
  spec.dense_user = 5;
  const std::string v3 = test::Write(fuserank::testing::MakeRandomModel(spec, 3), dir_ + "/v3");
  ASSERT_FALSE(v3.empty());
  absl::StatusOr<ReloadResult> other = models.Reload("m", v3);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(other->message,
              HasSubstr("note: its inputs differ from version 'v2''s (tables gone: item_0 "
                        "(item); new tables: user_1 (user), item_1 (item); user dense 2 -> 5): "
                        "requests with dense values of the old widths or tables it lacks are "
                        "refused (INVALID_ARGUMENT)"));
}

// The last holder of a retired version is a request completing on that version's own
// batcher thread: the version must still be freed (on the reaper, not by joining the
// batcher from inside itself).
TEST_F(ServedModelsTest, AVersionWhoseLastRequestEndsOnItsBatcherIsFreed) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  ModelHandle handle = *models.Acquire("");
  std::weak_ptr<const engine::Model> old_model = handle->model;
  std::unique_ptr<engine::Batch> batch = handle->batcher->AcquireBatch();
  ASSERT_TRUE(handle->decoder->Append(Request(), batch.get()).ok());

  ASSERT_TRUE(models.Reload("", v2_path_).ok());
  absl::Notification done;
  absl::Status status;
  int items = 0;
  engine::Batcher* batcher = handle->batcher.get();
  auto holder = std::make_shared<ModelHandle>(std::move(handle));
  ASSERT_TRUE(batcher
                  ->Submit(std::move(batch), engine::BatcherClock::time_point::max(),
                           [&, holder](const absl::Status& s, const engine::RequestResult& r) {
                             status = s;
                             items = static_cast<int>(r.items.size());
                             holder->reset();  // the last hold on v1, on v1's batcher thread
                             done.Notify();
                           })
                  .ok());
  holder.reset();
  done.WaitForNotification();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(items, 3);
  EXPECT_TRUE(Eventually([&] { return old_model.expired() && models.versions_freed() == 1; }));
  EXPECT_EQ(models.versions_freed(), 1);
  EXPECT_EQ((*models.Acquire(""))->version(), "v2");
}

TEST_F(ServedModelsTest, ReloadWithoutAPathReadsTheCurrentSpecAgain) {
  const std::string live = dir_ + "/live";
  std::filesystem::create_directories(live);
  std::filesystem::copy(
      dir_ + "/v1", live,
      std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", live + "/m.yaml", false).ok());
  std::filesystem::copy(
      dir_ + "/v2", live,
      std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  absl::StatusOr<ReloadResult> result = models.Reload("", "");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->version, "v2");
  EXPECT_EQ((*models.Acquire(""))->path, live + "/m.yaml");
}

TEST_F(ServedModelsTest, ReloadAgainstAStaleVersionIsAbortedAndLoadsNothing) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  const ModelHandle seen = *models.Acquire("");
  ASSERT_TRUE(models.Reload("", v2_path_).ok());
  absl::StatusOr<ReloadResult> stale = models.Reload("", v1_path_, seen.get());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*models.Acquire(""))->version(), "v2");
}

TEST_F(ServedModelsTest, AReloadDropsTheModelInfoOfTheRetiredVersion) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  ServedModels models(FileLoader(), metrics->get());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  const std::string cpu = R"(fuserank_model_info{device="cpu",)";
  const std::string v1 = cpu + R"(model="m",version="v1"} 1)";
  const std::string v2 = cpu + R"(model="m",version="v2"} 1)";
  const std::string other = cpu + R"(model="other",version="o1"} 1)";
  EXPECT_THAT((*metrics)->Scrape(), AllOf(HasSubstr(v1), HasSubstr(other)));

  ASSERT_TRUE(models.Reload("m", v2_path_).ok());
  std::string text = (*metrics)->Scrape();
  EXPECT_THAT(text, AllOf(HasSubstr(v2), HasSubstr(other)));
  EXPECT_THAT(text, ::testing::Not(HasSubstr(R"(model="m",version="v1")")));

  // The same version again: its one series stays.
  ASSERT_TRUE(models.Reload("m", v2_path_).ok());
  EXPECT_THAT((*metrics)->Scrape(), HasSubstr(v2));
  // A refused version changes nothing.
  EXPECT_FALSE(models.Reload("m", dir_ + "/nowhere.yaml").ok());
  EXPECT_THAT((*metrics)->Scrape(), HasSubstr(v2));
}

TEST_F(ServedModelsTest, ReloadAfterShutdownIsUnavailable) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  models.ShutdownBatchers();
  EXPECT_EQ(models.Reload("", v2_path_).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ServedModelsTest, AModelBuiltInMemoryNeedsAPathToReload) {
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      testing::BuildTestModel(Version("mem", "1", 4));
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::unique_ptr<ServedModel>> served = ServeModel("", *model, CpuOptions());
  ASSERT_TRUE(served.ok()) << served.status();
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Add(std::move(*served)).ok());
  absl::StatusOr<ReloadResult> result = models.Reload("mem", "");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("give the path"));
}

}  // namespace
}  // namespace fuserank::server

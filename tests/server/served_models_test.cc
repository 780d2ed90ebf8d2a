// ServedModels: the default model, lookup by name, NOT_FOUND naming the loaded models,
// reloads that swap a version in while holders of the old one finish on it, refused
// versions that leave the old one serving, and the old version freed once its last holder
// (here a request completing on a batcher thread) lets go.
#include "server/served_models.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/cpu/cpu_simd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TestModel;

std::string TestDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/served_models_", name, "_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Model `name` at `version` (1 user table, 1 item table of 50 rows, width 4).
TestModel Version(const std::string& name, const std::string& version, uint64_t seed) {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 50, 4);
  spec.name = name;
  spec.version = version;
  spec.weights_path = name + ".safetensors";
  return testing::MakeRandomModel(spec, seed);
}

std::string Write(const TestModel& model, const std::string& dir) {
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.ok() ? *path : "";
}

ModelLoaderOptions CpuOptions() {
  ModelLoaderOptions options;
  options.device = engine::DeviceChoice::kCpu;
  options.backend.workers = 2;
  options.backend.max_batch_candidates = 256;
  options.batcher.max_batch_candidates = 256;
  options.limits.max_candidates = 64;
  return options;
}

VersionLoader FileLoader() {
  return [](const std::string& name, const std::string& path, const ServedModel* previous) {
    return LoadModelVersion(name, path, CpuOptions(), previous);
  };
}

v1::RankRequest Request() {
  v1::RankRequest request;
  v1::Feature* user = request.add_user_features();
  user->set_name("user_0");
  user->add_ids(3);
  request.add_user_dense(0.5f);
  request.add_user_dense(-1.0f);
  for (int c = 0; c < 3; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(100 + c);
    v1::Feature* item = candidate->add_features();
    item->set_name("item_0");
    item->add_ids(c * 7);
    for (float d : {0.1f, 0.2f, 0.3f}) candidate->add_dense(d * (c + 1));
  }
  return request;
}

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class ServedModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    v1_path_ = Write(Version("m", "v1", 1), dir_ + "/v1");
    v2_path_ = Write(Version("m", "v2", 2), dir_ + "/v2");
    other_path_ = Write(Version("other", "o1", 3), dir_ + "/other");
  }

  std::string dir_, v1_path_, v2_path_, other_path_;
};

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

struct BrokenCase {
  std::string name;
  // Writes a broken version of model "m" into `dir` and returns its spec path.
  std::function<std::string(const std::string& dir)> write;
  absl::StatusCode code;
  std::string reason;  // a piece of the message
};

class BrokenVersionTest : public ServedModelsTest,
                          public ::testing::WithParamInterface<BrokenCase> {};

TEST_P(BrokenVersionTest, IsRefusedAndTheOldVersionKeepsServing) {
  ServedModels models(FileLoader());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  const std::string broken = GetParam().write(dir_ + "/broken");
  absl::StatusOr<ReloadResult> result = models.Reload("m", broken);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), GetParam().code);
  SCOPED_TRACE(result.status().ToString());
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("version 'v1' keeps serving"), HasSubstr(GetParam().reason)));
  ModelHandle current = *models.Acquire("m");
  EXPECT_EQ(current->version(), "v1");
  EXPECT_EQ(current->path, v1_path_);
  // It still scores.
  std::unique_ptr<engine::Batch> batch = current->batcher->AcquireBatch();
  ASSERT_TRUE(current->decoder->Append(Request(), batch.get()).ok());
  absl::Notification done;
  absl::Status status;
  ASSERT_TRUE(current->batcher
                  ->Submit(std::move(batch), engine::BatcherClock::time_point::max(),
                           [&](const absl::Status& s, const engine::RequestResult&) {
                             status = s;
                             done.Notify();
                           })
                  .ok());
  done.WaitForNotification();
  EXPECT_TRUE(status.ok()) << status;
}

std::string TruncatedWeights(const std::string& dir) {
  const std::string spec = Write(Version("m", "v2", 2), dir);
  const std::string weights = dir + "/m.safetensors";
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);
  return spec;
}

std::string WrongShape(const std::string& dir) {
  TestModel model = Version("m", "v2", 2);
  const std::string spec = Write(model, dir);
  model.spec.tables[1].rows = 60;  // the weights still hold 50 rows
  std::ofstream(spec, std::ios::trunc) << engine::ModelSpecToYaml(model.spec);
  return spec;
}

std::string NanWeights(const std::string& dir) {
  TestModel model = Version("m", "v2", 2);
  for (float& w : model.weights["top_mlp.1.weight"]) w = std::numeric_limits<float>::quiet_NaN();
  return Write(model, dir);
}

std::string MissingSpec(const std::string& dir) { return dir + "/does-not-exist.yaml"; }

INSTANTIATE_TEST_SUITE_P(
    Cases, BrokenVersionTest,
    ::testing::Values(BrokenCase{"truncated_safetensors", TruncatedWeights,
                                 absl::StatusCode::kInvalidArgument, "m.safetensors"},
                      BrokenCase{"wrong_shape", WrongShape, absl::StatusCode::kInvalidArgument,
                                 "embeddings.item_0.weight"},
                      BrokenCase{"nan_weights", NanWeights, absl::StatusCode::kInvalidArgument,
                                 "'top_mlp.1.weight': element 0 is nan"},
                      BrokenCase{"missing_spec", MissingSpec, absl::StatusCode::kFailedPrecondition,
                                 "does-not-exist.yaml"}),
    [](const ::testing::TestParamInfo<BrokenCase>& info) { return info.param.name; });

TEST_F(ServedModelsTest, AReloadDropsTheModelInfoOfTheRetiredVersion) {
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
  ASSERT_TRUE(metrics.ok());
  ServedModels models(FileLoader(), metrics->get());
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  ASSERT_TRUE(models.Load("", other_path_, false).ok());
  const std::string cpu = absl::StrCat(R"(fuserank_model_info{device="cpu",isa=")",
                                       engine::CpuIsaName(engine::GetCpuDispatch().isa), "\",");
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

// The early checks run before the reload lock: while a slow reload holds it, a version the
// check refuses is refused at once, and the loader never sees it.
TEST_F(ServedModelsTest, AVersionTheCheckRefusesIsRefusedWithoutWaitingForTheLock) {
  absl::Notification loading, release;
  std::atomic<int> loads{0};
  VersionLoader loader = [&](const std::string& name, const std::string& path,
                             const ServedModel* previous) {
    if (loads.fetch_add(1) == 1) {  // the second load (the first reload) stalls
      loading.Notify();
      release.WaitForNotification();
    }
    return LoadModelVersion(name, path, CpuOptions(), previous);
  };
  VersionCheck check = [](const std::string& name, const std::string& path) {
    return PrepareModelVersion(name, path, CpuOptions()).status();
  };
  ServedModels models(loader, nullptr, check);
  ASSERT_TRUE(models.Load("", v1_path_, false).ok());
  std::thread slow([&] { EXPECT_TRUE(models.Reload("m", v2_path_).ok()); });
  loading.WaitForNotification();  // the slow reload holds the lock now
  const std::string fifo = dir_ + "/fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir_ + "/none.yaml"}) {
    absl::StatusOr<ReloadResult> refused = models.Reload("m", path);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << path;
    EXPECT_THAT(refused.status().message(), HasSubstr("is refused and version 'v1' keeps serving"));
  }
  EXPECT_EQ(loads.load(), 2);
  release.Notify();
  slow.join();
  EXPECT_EQ((*models.Acquire("m"))->version(), "v2");
}

}  // namespace
}  // namespace fuserank::server

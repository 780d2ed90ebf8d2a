// ServedModels refusing a version: a broken one (truncated or NaN weights, a shape the
// weights do not have, a missing spec) leaves the old version serving and scoring, and one
// the early check refuses is refused while a slow reload holds the lock, never loaded.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "server/served_models.h"
#include "tests/server/served_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using test::CpuOptions;
using test::FileLoader;
using test::Request;
using test::ServedModelsTest;
using test::Version;
using test::Write;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TestModel;

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

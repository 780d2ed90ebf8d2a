// GuardedBackend (server/guarded_backend.h): an error that is no device fault passes
// through untouched; a device fault fails the version for good (fail) or moves it to the
// CPU engine, the batch that met it scored again (cpu); the reaction runs once.
#include "server/guarded_backend.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "engine/cpu/cpu_backend.h"
#include "engine/device_fault.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_warmup.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const engine::Model> Model() {
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      testing::BuildTestModel(testing::MakeRandomModel(testing::SmallSpec(2, 3, 30, 4), 7));
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// Answers every batch with `error`; once `error` is a device fault, reports it in health().
class ErrorBackend final : public engine::Backend {
 public:
  explicit ErrorBackend(absl::Status error) : error_(std::move(error)) {}
  std::string device() const override { return "cuda:3"; }
  int num_workers() const override { return 2; }
  absl::Status Run(int, const engine::Batch&, engine::BatchResult*) override {
    runs_.fetch_add(1);
    return error_;
  }
  absl::Status health() const override {
    return engine::IsDeviceFault(error_) ? engine::DeviceFailedStatus(device(), error_)
                                         : absl::OkStatus();
  }
  std::atomic<int> runs_{0};

 private:
  absl::Status error_;
};

absl::Status Fault() {
  return engine::MarkDeviceFault(absl::InternalError("sync: cudaErrorLaunchFailure"),
                                 engine::cuda_error::kLaunchFailure);
}

struct Guarded {
  std::unique_ptr<GuardedBackend> backend;
  ErrorBackend* primary = nullptr;
  std::shared_ptr<std::atomic<int>> reactions = std::make_shared<std::atomic<int>>(0);
};

Guarded Guard(std::shared_ptr<const engine::Model> model, absl::Status error,
              OnDeviceFailure on_failure) {
  Guarded g;
  auto primary = std::make_unique<ErrorBackend>(std::move(error));
  g.primary = primary.get();
  DeviceFailurePolicy policy;
  policy.on_failure = on_failure;
  policy.model = "m";
  policy.on_failed = [reactions = g.reactions] { reactions->fetch_add(1); };
  g.backend = std::make_unique<GuardedBackend>(std::move(primary), std::move(model), policy);
  return g;
}

TEST(GuardedBackendTest, AnErrorThatIsNoDeviceFaultPassesThrough) {
  const std::shared_ptr<const engine::Model> model = Model();
  Guarded g = Guard(model, absl::InternalError("cuBLASLt status 13"), OnDeviceFailure::kCpu);
  const engine::Batch batch = SyntheticBatch(model, 4);
  engine::BatchResult result;
  for (int i = 0; i < 2; ++i) {
    const absl::Status status = g.backend->Run(0, batch, &result);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(status.message(), "cuBLASLt status 13");
  }
  EXPECT_EQ(g.primary->runs_.load(), 2);  // still tried: the device did not fail
  EXPECT_TRUE(g.backend->health().ok());
  EXPECT_FALSE(g.backend->device_failed());
  EXPECT_EQ(g.backend->device(), "cuda:3");
  EXPECT_EQ(g.reactions->load(), 0);
}

TEST(GuardedBackendTest, FailAnswersUnavailableForGoodAndReactsOnce) {
  const std::shared_ptr<const engine::Model> model = Model();
  Guarded g = Guard(model, Fault(), OnDeviceFailure::kFail);
  const engine::Batch batch = SyntheticBatch(model, 4);
  engine::BatchResult result;
  for (int i = 0; i < 3; ++i) {
    const absl::Status status = g.backend->Run(i % 2, batch, &result);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(status.message(), HasSubstr("model 'm'"));
    EXPECT_THAT(status.message(), HasSubstr("device cuda:3 failed"));
    EXPECT_THAT(status.message(), HasSubstr("cudaErrorLaunchFailure"));
  }
  EXPECT_EQ(g.primary->runs_.load(), 1);  // nothing more is sent to a failed device
  EXPECT_EQ(g.backend->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(g.backend->device_failed());
  EXPECT_EQ(g.reactions->load(), 1);
}

TEST(GuardedBackendTest, CpuScoresTheFailedBatchAgainAsTheCpuEngineDoes) {
  const std::shared_ptr<const engine::Model> model = Model();
  Guarded g = Guard(model, Fault(), OnDeviceFailure::kCpu);
  const engine::Batch batch = SyntheticBatch(model, 9);
  engine::BackendOptions options;
  options.workers = 1;
  std::unique_ptr<engine::Backend> cpu = engine::CreateCpuBackend(model, options);
  engine::BatchResult expected;
  ASSERT_TRUE(cpu->Run(0, batch, &expected).ok());

  for (int i = 0; i < 2; ++i) {  // the batch that met the fault, then a later one
    engine::BatchResult result;
    const absl::Status status = g.backend->Run(1, batch, &result);  // worker 1 of 2
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(result.result_begin, expected.result_begin);
    ASSERT_EQ(result.items.size(), expected.items.size());
    for (size_t k = 0; k < result.items.size(); ++k) {
      EXPECT_EQ(result.items[k].index, expected.items[k].index);
      EXPECT_EQ(result.items[k].score, expected.items[k].score);
    }
  }
  EXPECT_EQ(g.primary->runs_.load(), 1);
  EXPECT_TRUE(g.backend->health().ok());
  EXPECT_TRUE(g.backend->device_failed());
  EXPECT_EQ(g.backend->device(), "cpu");
  EXPECT_EQ(g.backend->num_workers(), 2);
  EXPECT_EQ(g.reactions->load(), 1);
}

}  // namespace
}  // namespace fuserank::server

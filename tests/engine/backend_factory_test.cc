// CreateBackend: engine.device cpu / auto / cuda. On a machine without a GPU (CI), auto
// falls back to the CPU and cuda fails with FAILED_PRECONDITION saying why; with a GPU,
// both give the CUDA backend. The CUDA module is the real one of this build
// (<bin>/../lib/libfuserank_cuda.so) or a missing path set through FUSERANK_CUDA_MODULE.
#include "engine/backend_factory.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

std::shared_ptr<const Model> SmallModel() {
  auto model = fuserank::testing::BuildTestModel(
      fuserank::testing::MakeRandomModel(fuserank::testing::SmallSpec(1, 2, 30, 4), 5));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// Sets FUSERANK_CUDA_MODULE for the scope (unset when value is nullopt).
class ScopedModulePath {
 public:
  explicit ScopedModulePath(std::optional<std::string> value) {
    if (const char* old = std::getenv("FUSERANK_CUDA_MODULE")) old_ = old;
    if (value) {
      setenv("FUSERANK_CUDA_MODULE", value->c_str(), 1);
    } else {
      unsetenv("FUSERANK_CUDA_MODULE");
    }
  }
  ~ScopedModulePath() {
    if (old_) {
      setenv("FUSERANK_CUDA_MODULE", old_->c_str(), 1);
    } else {
      unsetenv("FUSERANK_CUDA_MODULE");
    }
  }

 private:
  std::optional<std::string> old_;
};

// One request of two candidates, every bag empty: enough to prove a backend runs.
Batch TinyBatch(std::shared_ptr<const Model> model) {
  Batch b;
  b.model = model;
  b.candidate_begin = {0, 2};
  b.top_k = {2};
  b.user.bag_begin.assign(1 + model->user_tables().size(), 0);
  b.item.bag_begin.assign(1 + 2 * model->item_tables().size(), 0);
  b.user_dense.assign(model->spec().dense_user, 0.5f);
  b.item_dense.assign(2 * model->spec().dense_item, 0.25f);
  return b;
}

TEST(BackendFactoryTest, CpuChoiceGivesTheCpuEngine) {
  auto model = SmallModel();
  ASSERT_NE(model, nullptr);
  auto backend = CreateBackend(model, DeviceChoice::kCpu, BackendOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->device(), "cpu");
}

TEST(BackendFactoryTest, CudaWithAMissingModuleFailsNamingThePath) {
  auto model = SmallModel();
  ASSERT_NE(model, nullptr);
  ScopedModulePath path("/nonexistent/dir/libfuserank_cuda.so");
  auto backend = CreateBackend(model, DeviceChoice::kCuda, BackendOptions{});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(backend.status().message().find("/nonexistent/dir/libfuserank_cuda.so"),
            std::string::npos)
      << backend.status();
  EXPECT_NE(backend.status().message().find("engine.device is cuda"), std::string::npos);
}

TEST(BackendFactoryTest, AutoWithAMissingModuleRunsOnTheCpu) {
  auto model = SmallModel();
  ASSERT_NE(model, nullptr);
  ScopedModulePath path("/nonexistent/dir/libfuserank_cuda.so");
  auto backend = CreateBackend(model, DeviceChoice::kAuto, BackendOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->device(), "cpu");
  BatchResult result;
  ASSERT_TRUE((*backend)->Run(0, TinyBatch(model), &result).ok());
  EXPECT_EQ(result.items.size(), 2u);
}

// This build's own module: a GPU decides the outcome, and auto and cuda must agree; where
// a GPU is (/dev/nvidiactl, or FUSERANK_REQUIRE_GPU=1), cuda must work.
TEST(BackendFactoryTest, AutoAndCudaAgreeOnWhetherAGpuIsUsable) {
  auto model = SmallModel();
  ASSERT_NE(model, nullptr);
  ScopedModulePath path(std::nullopt);
  auto cuda = CreateBackend(model, DeviceChoice::kCuda, BackendOptions{});
  auto automatic = CreateBackend(model, DeviceChoice::kAuto, BackendOptions{});
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  if (cuda.ok()) {
    EXPECT_EQ((*cuda)->device(), "cuda:0");
    EXPECT_EQ((*automatic)->device(), "cuda:0");
    return;
  }
  // No GPU (or a build without CUDA): a precondition, with the reason, and the CPU.
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition) << cuda.status();
  const std::string message(cuda.status().message());
  const bool no_device = message.find("no usable CUDA device") != std::string::npos;
  const bool no_module = message.find("without the CUDA backend") != std::string::npos ||
                         message.find("cannot load the CUDA backend module") != std::string::npos;
  EXPECT_TRUE(no_device || no_module) << message;
  // Where a GPU is required, the CUDA engine failing is a failure, not a skip; where one
  // is only present, too, unless this build has no CUDA engine at all.
  const bool built = message.find("without the CUDA backend") == std::string::npos;
  const char* required = std::getenv("FUSERANK_REQUIRE_GPU");
  const bool gpu_required = required != nullptr && std::string(required) == "1";
  const bool gpu_here = std::filesystem::exists("/dev/nvidiactl") &&
                        (required == nullptr || std::string(required) != "0");
  EXPECT_FALSE(gpu_required || (built && gpu_here))
      << "a GPU is here (" << (gpu_required ? "FUSERANK_REQUIRE_GPU=1" : "/dev/nvidiactl")
      << ", FUSERANK_REQUIRE_GPU=0 lets this pass) but engine.device cuda failed: " << message;
  EXPECT_EQ((*automatic)->device(), "cpu");
  std::printf("engine.device cuda here: %s\n", message.c_str());
}

TEST(BackendFactoryTest, ABadGpuOrdinalIsRefused) {
  auto model = SmallModel();
  ASSERT_NE(model, nullptr);
  ScopedModulePath path(std::nullopt);
  BackendOptions options;
  options.gpu = 99;
  auto cuda = CreateBackend(model, DeviceChoice::kCuda, options);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition) << cuda.status();
}

}  // namespace
}  // namespace fuserank::engine

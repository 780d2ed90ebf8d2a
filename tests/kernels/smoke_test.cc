// The first step of a GPU check run (bench/gpu/check.sh): a usable device, the probe
// kernel on it, and the CUDA backend module loaded the way the server loads it, scoring one
// batch. Seconds, so a broken bundle or an image without a usable driver stops the run
// with one clear line before minutes go into the other suites.
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "engine/backend_factory.h"
#include "engine/cuda/cuda_probe.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::cuda {
namespace {

TEST(GpuSmokeTest, TheProbeKernelRunsOnTheDevice) {
  FUSERANK_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::string> device = ProbeCudaDevice(0);
  ASSERT_TRUE(device.ok()) << device.status();
  RecordProperty("device", *device);
  std::printf("device: %s\n", device->c_str());
}

TEST(GpuSmokeTest, TheModuleLoadsAndScoresABatch) {
  FUSERANK_SKIP_WITHOUT_GPU();
  gpu_test::UseBuiltModule();
  auto model = fuserank::testing::BuildTestModel(
      fuserank::testing::MakeRandomModel(fuserank::testing::SmallSpec(1, 2, 100, 8), 1));
  ASSERT_TRUE(model.ok()) << model.status();
  auto backend = CreateBackend(*model, DeviceChoice::kCuda, BackendOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->device(), "cuda:0");
  std::mt19937_64 rng(2);
  engine::test::RequestShape shape;
  shape.candidates = 5;
  const Batch batch =
      engine::test::MakeBatch(*model, {engine::test::RandomRequest((*model)->spec(), shape, rng)});
  BatchResult result;
  const absl::Status ran = (*backend)->Run(0, batch, &result);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(result.items.size(), 5u);
}

}  // namespace
}  // namespace fuserank::engine::cuda

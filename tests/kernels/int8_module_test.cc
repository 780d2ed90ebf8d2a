// An int8 model through the run-time loaded module: engine.device auto now picks the GPU
// for it (before int8 was served, auto fell back to the CPU), and every score of a batch
// matches the CPU engine's int8 scores and the double reference within 1e-5.
#include <memory>
#include <random>
#include <vector>

#include "engine/backend_factory.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

TEST(CudaModuleTest, AutoServesAnInt8ModelOnTheGpu) {
  FUSERANK_SKIP_WITHOUT_GPU();
  gpu_test::UseBuiltModule();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 500, 16);
  spec.embedding_dtype = DType::kInt8;
  spec.tables.back().pooling = Pooling::kMean;
  fuserank::testing::TestModel test_model;
  auto model = engine::test::BuildVariantModel(spec, seed, rng, &test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions options;
  auto gpu = CreateBackend(*model, DeviceChoice::kAuto, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->device(), "cuda:0");
  auto cpu = CreateCpuBackend(*model, options);
  std::vector<engine::test::RefRequest> requests;
  for (int n : {5, 300, 0, 64}) {
    engine::test::RequestShape shape;
    shape.candidates = n;
    shape.max_bag = 6;
    requests.push_back(engine::test::RandomRequest(spec, shape, rng));  // top_k 0: all
  }
  const Batch batch = engine::test::MakeBatch(*model, requests);
  BatchResult got_result, want_result;
  const auto got = engine::test::ScoresByIndex(**gpu, 0, batch, got_result);
  const auto want = engine::test::ScoresByIndex(*cpu, 0, batch, want_result);
  ASSERT_EQ(got.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    ASSERT_EQ(got[r].size(), requests[r].candidates.size());
    for (size_t c = 0; c < got[r].size(); ++c) {
      EXPECT_NEAR(got[r][c], want[r][c], 1e-5) << "request " << r << " candidate " << c;
      EXPECT_NEAR(got[r][c], engine::test::ReferenceScore(test_model, requests[r], c), 1e-5)
          << "request " << r << " candidate " << c;
    }
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda

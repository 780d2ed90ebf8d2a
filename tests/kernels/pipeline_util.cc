#include "tests/kernels/pipeline_util.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace fuserank::engine::cuda {

using engine::test::RefRequest;

CudaOptions TestCudaOptions() {
  CudaOptions options;
  const char* autotune = std::getenv("FUSERANK_TEST_MLP_AUTOTUNE");
  if (autotune != nullptr && std::string(autotune) == "0") options.mlp_autotune = false;
  return options;
}

TestSetup MakeModel(const PipelineCase& p, uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(p.user_tables, p.item_tables, 1000, p.dim);
  if (spec.tables.size() >= 4) std::swap(spec.tables[1], spec.tables[3]);  // user, item, item, ..
  spec.tables.back().pooling = Pooling::kMean;
  spec.embedding_dtype = p.dtype;
  spec.interaction = p.interaction;
  if (p.interaction == Interaction::kLinear) spec.cross_dim = 24;
  if (p.interaction == Interaction::kDcn) spec.dcn = {p.graphs ? 3 : 2, p.dim == 4 ? 0 : 7};
  if (!p.bottom) {
    spec.bottom_mlp.clear();
    if (p.interaction == Interaction::kDot) {
      spec.dense_user = p.dim / 2;
      spec.dense_item = p.dim - p.dim / 2;
    }
  }
  spec.top_mlp = {32, 16, 1};
  TestSetup s;
  absl::StatusOr<std::shared_ptr<const Model>> model;
  if (p.dtype == DType::kInt8) {
    // Codes with a drawn (scale, bias) per row; the test model holds their values.
    std::mt19937_64 rng(seed);
    model = engine::test::BuildVariantModel(spec, seed, rng, &s.test_model);
  } else {
    s.test_model = fuserank::testing::MakeRandomModel(spec, seed);
    model = fuserank::testing::BuildTestModel(s.test_model);
  }
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) s.model = *model;
  return s;
}

std::vector<RefRequest> MakeRequests(const ModelSpec& spec, const std::vector<int>& sizes,
                                     std::mt19937_64& rng, int max_bag) {
  std::vector<RefRequest> requests;
  for (int n : sizes) {
    engine::test::RequestShape shape;
    shape.candidates = n;
    shape.max_bag = max_bag;
    requests.push_back(engine::test::RandomRequest(spec, shape, rng));
    requests.back().top_k = static_cast<uint32_t>(rng() % (n + 2));  // 0: all
  }
  return requests;
}

void ExpectMatches(const TestSetup& s, const std::vector<RefRequest>& requests, const Batch& batch,
                   const BatchResult& got, const BatchResult& cpu, double tolerance) {
  ASSERT_EQ(got.result_begin, cpu.result_begin);
  ASSERT_EQ(got.items.size(), cpu.items.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    std::vector<float> score_of(requests[r].candidates.size());
    for (size_t c = 0; c < score_of.size(); ++c) {
      score_of[c] = static_cast<float>(
          engine::test::ReferenceScore(s.test_model, requests[r], static_cast<int>(c)));
    }
    const uint32_t b = got.result_begin[r];
    gpu_test::ExpectSameTopK(got.items.data() + b, cpu.items.data() + b,
                             got.result_begin[r + 1] - b, score_of, tolerance,
                             "request " + std::to_string(r));
  }
}

}  // namespace fuserank::engine::cuda

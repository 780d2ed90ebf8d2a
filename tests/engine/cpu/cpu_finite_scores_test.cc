// Every score the CPU engine returns is a number in [0, 1] for every finite input, even
// where float32 arithmetic overflows on the way (huge weights in a mean bag, huge dense
// values, huge finite model weights): each stage saturates +-Inf to +-FLT_MAX and NaN to
// 0 (SaturateNonFinite) instead of letting Inf - Inf turn the score into NaN. Ordinary
// inputs are untouched: the other CPU tests compare them with the reference bit for bit.
#include <cfloat>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

struct ExtremeCase {
  const char* name;
  Interaction interaction;
  Pooling pooling;
  float model_weight;  // every layer weight and bias is +-this
  float table_value;   // every table value is +-this
  float dense;         // every dense value is +-this
  float bag_weight;    // bag weights cycle through +this, +this, -this
  // top_mlp [1]: no ReLU between the interaction and the score to swallow a NaN.
  bool single_top_layer;
};

class FiniteScoresTest : public ::testing::TestWithParam<ExtremeCase> {};

// Random signs so that sums of overflowing products meet as +Inf and -Inf; tables all
// positive, so that a mean over huge bag weights is Inf / Inf.
void Fill(std::vector<float>& values, float magnitude, bool random_sign, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (float& v : values) v = (!random_sign || rng() % 2 == 0 ? magnitude : -magnitude);
}

TEST_P(FiniteScoresTest, EveryScoreIsInZeroOne) {
  const ExtremeCase& c = GetParam();
  ModelSpec spec = fuserank::testing::SmallSpec(2, 2, 40, 4);
  spec.interaction = c.interaction;
  spec.bottom_mlp = {8, 4};
  spec.top_mlp = c.single_top_layer ? std::vector<int>{1} : std::vector<int>{8, 8, 1};
  if (c.interaction == Interaction::kLinear) spec.cross_dim = 6;
  if (c.interaction == Interaction::kDcn) spec.dcn = {2, c.single_top_layer ? 0 : 3};
  for (TableSpec& t : spec.tables) t.pooling = c.pooling;
  fuserank::testing::TestModel test_model = fuserank::testing::MakeRandomModel(spec, 11);
  uint64_t seed = 1;
  for (auto& [name, values] : test_model.weights) {
    const bool table = name.rfind("embeddings.", 0) == 0;
    Fill(values, table ? c.table_value : c.model_weight, !table, seed++);
  }
  absl::StatusOr<std::shared_ptr<const Model>> model =
      fuserank::testing::BuildTestModel(test_model);
  ASSERT_TRUE(model.ok()) << model.status();

  std::mt19937_64 rng(7);
  std::vector<test::RefRequest> requests;
  for (int r = 0; r < 4; ++r) {
    test::RequestShape shape;
    shape.candidates = 70;  // past one 64-candidate tile
    test::RefRequest request = test::RandomRequest(spec, shape, rng);
    int k = 0;
    auto extreme = [&](test::RefBag& bag) {
      bag.ids = {1, 2, 3};
      bag.weights = {c.bag_weight, c.bag_weight, -c.bag_weight};
      if (k++ % 2 == 1) bag.weights[2] = c.bag_weight;  // sums that overflow too
    };
    for (test::RefBag& bag : request.user_bags) extreme(bag);
    for (float& v : request.user_dense) v = (k++ % 2 ? c.dense : -c.dense);
    for (test::RefCandidate& candidate : request.candidates) {
      for (test::RefBag& bag : candidate.bags) extreme(bag);
      for (float& v : candidate.dense) v = (k++ % 2 ? c.dense : -c.dense);
    }
    requests.push_back(std::move(request));
  }
  for (int threads : {1, 2}) {
    BackendOptions options;
    options.cpu_threads = threads;
    std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
    BatchResult result;
    const std::vector<std::vector<float>> scores =
        test::ScoresByIndex(*backend, 0, test::MakeBatch(*model, requests), result);
    for (size_t r = 0; r < scores.size(); ++r) {
      for (size_t i = 0; i < scores[r].size(); ++i) {
        const float s = scores[r][i];
        EXPECT_TRUE(std::isfinite(s) && s >= 0.0f && s <= 1.0f)
            << c.name << ": request " << r << " candidate " << i << " scored " << s;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Extremes, FiniteScoresTest,
    ::testing::Values(ExtremeCase{"HugeDense", Interaction::kConcat, Pooling::kSum, 1.0f, 0.5f,
                                  3e38f, 1.0f, false},
                      ExtremeCase{"HugeWeightsInAMeanBag", Interaction::kDot, Pooling::kMean, 0.5f,
                                  0.5f, 1.0f, 3e38f, true},
                      ExtremeCase{"HugeWeightsInASumBag", Interaction::kLinear, Pooling::kSum, 0.5f,
                                  0.5f, 1.0f, 3e38f, true},
                      ExtremeCase{"HugeModelWeights", Interaction::kDot, Pooling::kSum, 3e38f,
                                  3e38f, 1e30f, 1e30f, false},
                      // Not kLinear: a fold of cross into top_mlp.0 that overflows float32
                      // is refused at load (ModelTensorChecksTest).
                      ExtremeCase{"HugeEverything", Interaction::kDot, Pooling::kMean, 3e38f, 3e38f,
                                  3e38f, 3e38f, true},
                      ExtremeCase{"HugeDenseThroughDcn", Interaction::kDcn, Pooling::kSum, 1.0f,
                                  0.5f, 3e38f, 1.0f, false},
                      ExtremeCase{"HugeEverythingThroughFullRankDcn", Interaction::kDcn,
                                  Pooling::kMean, 3e38f, 3e38f, 3e38f, 3e38f, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fuserank::engine

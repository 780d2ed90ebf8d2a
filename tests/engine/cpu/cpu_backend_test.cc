// The CPU engine's scores (CreateCpuBackend) against the independent double reference of
// cpu_reference_util, over random seeded models of every interaction, table dtype (fp32,
// fp16, bf16, row-wise int8) and shape variant, with several requests per batch, 1 and
// 2 threads, and every code path this CPU runs (AVX-512, AVX2, baseline; the ones it
// lacks are skipped with a message in the log).
#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_simd.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using fuserank::testing::TestModel;
using test::BuildVariantModel;
using test::MakeBatch;
using test::RandomRequest;
using test::RefRequest;
using test::RequestShape;
using test::ScoresByIndex;
using test::Variant;
using test::VariantSpec;

constexpr double kTolerance = 1e-5;

class CpuBackendTest : public ::testing::TestWithParam<std::tuple<Interaction, DType, Variant>> {};

TEST_P(CpuBackendTest, MatchesReference) {
  const auto [interaction, dtype, variant] = GetParam();
  const uint64_t seed = 1 + static_cast<int>(interaction) * 100 + static_cast<int>(dtype) * 10 +
                        static_cast<int>(variant) * 1000;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  TestModel test_model;
  absl::StatusOr<std::shared_ptr<const Model>> model =
      BuildVariantModel(VariantSpec(interaction, dtype, variant, rng), seed, rng, &test_model);
  ASSERT_TRUE(model.ok()) << model.status();

  // Several requests in one batch: sizes around the tile edge, one empty request.
  std::vector<RefRequest> requests;
  for (int candidates : {1, 7, 0, 64, 65, 130}) {
    RequestShape shape;
    shape.candidates = candidates;
    shape.max_bag = candidates % 2 == 0 ? 4 : 1;
    shape.weights = candidates != 7;
    requests.push_back(RandomRequest(test_model.spec, shape, rng));
  }
  const Batch batch = MakeBatch(*model, requests);

  for (int threads : {1, 2}) {
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kGeneric}) {
      if (!CpuSupports(isa)) {
        if (threads == 1) std::printf("[  SKIP    ] no %s on this CPU\n", CpuIsaName(isa));
        continue;
      }
      SCOPED_TRACE(::testing::Message() << "threads=" << threads << " isa=" << CpuIsaName(isa));
      ForceCpuIsa(isa);
      BackendOptions options;
      options.workers = 2;
      options.cpu_threads = threads;
      std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
      BatchResult result;
      const auto scores = ScoresByIndex(*backend, 1, batch, result);
      ForceCpuIsa(std::nullopt);
      for (size_t r = 0; r < requests.size(); ++r) {
        for (size_t c = 0; c < requests[r].candidates.size(); ++c) {
          const double want = test::ReferenceScore(test_model, requests[r], c);
          ASSERT_FALSE(std::isnan(want)) << "reference shape mismatch";
          ASSERT_NEAR(scores[r][c], want, kTolerance) << "request " << r << " candidate " << c;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllInteractionsDtypesShapes, CpuBackendTest,
    ::testing::Combine(::testing::Values(Interaction::kConcat, Interaction::kDot,
                                         Interaction::kLinear, Interaction::kDcn),
                       ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kInt8),
                       ::testing::Values(Variant::kFull, Variant::kNoDense, Variant::kNoBottom,
                                         Variant::kUserDenseOnly, Variant::kItemDenseOnly,
                                         Variant::kNoUserTables, Variant::kNoItemTables,
                                         Variant::kSingleLayers, Variant::kOddDims)),
    [](const auto& info) {
      const Interaction interaction = std::get<0>(info.param);
      return absl::StrCat(interaction == Interaction::kConcat   ? "Concat"
                          : interaction == Interaction::kDot    ? "Dot"
                          : interaction == Interaction::kLinear ? "Linear"
                                                                : "Dcn",
                          "_", test::DTypeLabel(std::get<1>(info.param)), "_",
                          test::VariantName(std::get<2>(info.param)));
    });

TEST(CpuBackendModelTest, ScoresEqualForEveryWorker) {
  std::mt19937_64 rng(9);
  TestModel test_model;
  auto model = BuildVariantModel(
      VariantSpec(Interaction::kConcat, DType::kF32, Variant::kFull, rng), 9, rng, &test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  RequestShape shape;
  shape.candidates = 40;
  const Batch batch = MakeBatch(*model, {RandomRequest(test_model.spec, shape, rng)});
  BackendOptions options;
  options.workers = 3;
  std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
  BatchResult first, other;
  ASSERT_TRUE(backend->Run(0, batch, &first).ok());
  for (int w = 1; w < 3; ++w) {
    ASSERT_TRUE(backend->Run(w, batch, &other).ok());
    ASSERT_EQ(other.items.size(), first.items.size());
    for (size_t i = 0; i < first.items.size(); ++i) {
      EXPECT_EQ(other.items[i].index, first.items[i].index);
      EXPECT_EQ(other.items[i].score, first.items[i].score);
    }
  }
}

}  // namespace
}  // namespace fuserank::engine

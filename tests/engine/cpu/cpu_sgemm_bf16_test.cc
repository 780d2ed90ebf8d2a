// The opt-in bf16 MLP (engine.cpu_precision: bf16): the bf16 rounding, SgemmBf16 against a
// double-precision product of the bf16-rounded operands written here over edge sizes,
// and whole models at bf16 against the fp32 engine. Skipped with a message where the CPU
// lacks AVX512_BF16 (the fp32 engine is then the only one).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/cpu/sgemm.h"
#include "engine/cpu/sgemm_bf16.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/engine/cpu/sgemm_check_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using test::kPoison;

float Bf16(float x) { return Bf16ToFloat(RoundToBf16(x)); }

TEST(Bf16RoundingTest, RoundsToNearestEvenAndStaysFinite) {
  EXPECT_EQ(RoundToBf16(1.0f), 0x3F80);
  EXPECT_EQ(RoundToBf16(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to the even one (1 + 2^-6).
  EXPECT_EQ(RoundToBf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(RoundToBf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above halfway: up
  EXPECT_EQ(RoundToBf16(FLT_MAX), 0x7F7F);                    // not infinity
  EXPECT_EQ(RoundToBf16(-FLT_MAX), 0xFF7F);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(RoundToBf16(std::nanf("")))));
  EXPECT_EQ(Bf16ToFloat(0x3FC0), 1.5f);
}

bool SkipWithoutBf16() { return !Bf16KernelsAvailable().ok(); }

class SgemmBf16Test : public ::testing::TestWithParam<std::tuple<int /*m*/, int /*n*/, int /*k*/>> {
};

TEST_P(SgemmBf16Test, MatchesDoubleProductOfRoundedOperands) {
  if (SkipWithoutBf16()) {
    GTEST_SKIP() << Bf16KernelsAvailable().message();
  }
  const auto [m, n, k] = GetParam();
  const uint64_t seed = 11 + m * 1000003ull + n * 1009ull + k;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n) * k), bias(n);
  for (float& x : w) x = dist(rng);
  for (float& x : bias) x = dist(rng);
  const int lda = k + 5, ldc = n + 3;
  std::vector<float> a(static_cast<size_t>(std::max(m, 1)) * lda);
  for (float& x : a) x = dist(rng);
  const PackedMatrixBf16 packed =
      PackedMatrixBf16::FromPacked(PackedMatrix::FromTransposed(w.data(), n, k, k));
  ASSERT_EQ(packed.k(), k);
  ASSERT_EQ(packed.n(), n);
  // Products of two bf16 values are exact in fp32: only the fp32 sums round.
  ASSERT_TRUE(test::GemmMatchesDoubleProduct(
      m, n, k, [&](int i, int p) { return Bf16(a[i * lda + p]); },
      [&](int j, int p) { return Bf16(w[static_cast<size_t>(j) * k + p]); }, bias.data(), ldc,
      [&](const float* b, bool relu, float* c) {
        SgemmBf16(m, a.data(), lda, packed, b, relu, c, ldc);
      }));
}

// m around the 12-row block, n around one and two panels and an odd panel count, k odd
// (a half pair) and over one 32-value conversion step.
INSTANTIATE_TEST_SUITE_P(EdgeSizes, SgemmBf16Test,
                         ::testing::Combine(::testing::Values(0, 1, 5, 12, 13, 25, 64),
                                            ::testing::Values(1, 7, 16, 17, 32, 33, 600),
                                            ::testing::Values(1, 2, 3, 31, 32, 33, 257)));

TEST(SgemmBf16Test, HugeInputsStayFinite) {
  if (SkipWithoutBf16()) {
    GTEST_SKIP() << Bf16KernelsAvailable().message();
  }
  const int k = 4, n = 16;
  std::vector<float> w(n * k, 1.0f);
  const PackedMatrixBf16 packed =
      PackedMatrixBf16::FromPacked(PackedMatrix::FromTransposed(w.data(), n, k, k));
  std::vector<float> a = {FLT_MAX, -FLT_MAX, 1.0f, 0.0f};
  std::vector<float> c(n, kPoison);
  SgemmBf16(1, a.data(), k, packed, nullptr, false, c.data(), n);
  // FLT_MAX becomes bf16's largest finite value, not infinity: the two cancel exactly.
  for (float v : c) EXPECT_EQ(v, 1.0f);
}

// Whole models at bf16 against the same models at fp32: every score within a bf16-sized
// tolerance, on every interaction and a few shapes.
class CpuBf16ModelTest : public ::testing::TestWithParam<std::tuple<Interaction, test::Variant>> {};

TEST_P(CpuBf16ModelTest, ScoresCloseToFp32) {
  if (SkipWithoutBf16()) {
    GTEST_SKIP() << Bf16KernelsAvailable().message();
  }
  const auto [interaction, variant] = GetParam();
  const uint64_t seed = 31 + static_cast<int>(interaction) * 7 + static_cast<int>(variant) * 100;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  fuserank::testing::TestModel test_model;
  auto model = test::BuildVariantModel(test::VariantSpec(interaction, DType::kF32, variant, rng),
                                       seed, rng, &test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<test::RefRequest> requests;
  for (int candidates : {1, 13, 64}) {
    test::RequestShape shape;
    shape.candidates = candidates;
    shape.max_bag = 3;
    requests.push_back(test::RandomRequest(test_model.spec, shape, rng));
  }
  const Batch batch = test::MakeBatch(*model, requests);
  BackendOptions options;
  std::unique_ptr<Backend> fp32 = CreateCpuBackend(*model, options);
  options.cpu_precision = CpuPrecision::kBf16;
  std::unique_ptr<Backend> bf16 = CreateCpuBackend(*model, options);
  BatchResult result32, result16;
  const auto want = test::ScoresByIndex(*fp32, 0, batch, result32);
  const auto got = test::ScoresByIndex(*bf16, 0, batch, result16);
  double max_diff = 0;
  bool any_differs = false;
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t c = 0; c < want[r].size(); ++c) {
      max_diff = std::max<double>(max_diff, std::fabs(got[r][c] - want[r][c]));
      any_differs |= got[r][c] != want[r][c];
    }
  }
  EXPECT_LT(max_diff, 2e-2);
  // The bf16 path really ran: scores are not the fp32 ones bit for bit (a model without
  // any per-candidate layer wider than one would be; the variants here all have one).
  EXPECT_TRUE(any_differs);
}

INSTANTIATE_TEST_SUITE_P(
    Interactions, CpuBf16ModelTest,
    ::testing::Combine(::testing::Values(Interaction::kConcat, Interaction::kDot,
                                         Interaction::kLinear),
                       ::testing::Values(test::Variant::kFull, test::Variant::kNoBottom,
                                         test::Variant::kNoDense)));

TEST(CpuBf16PlanTest, RefusedWhereTheCpuCannot) {
  std::mt19937_64 rng(5);
  fuserank::testing::TestModel test_model;
  auto model = test::BuildVariantModel(
      test::VariantSpec(Interaction::kConcat, DType::kF32, test::Variant::kFull, rng), 5, rng,
      &test_model);
  ASSERT_TRUE(model.ok()) << model.status();
  const absl::StatusOr<CpuPlan> plan = BuildCpuPlan(**model, CpuPrecision::kBf16);
  if (Bf16KernelsAvailable().ok()) {
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_FALSE(plan->top.empty());
    EXPECT_FALSE(plan->top[0].weight_bf16.empty());
    EXPECT_TRUE(plan->top_user.weight_bf16.empty());  // once per request: fp32
  } else {
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(plan.status().message().find("engine.cpu_precision"), std::string::npos);
  }
  const absl::StatusOr<CpuPlan> fp32 = BuildCpuPlan(**model, CpuPrecision::kFp32);
  ASSERT_TRUE(fp32.ok());
  for (const PackedLayer& layer : fp32->top) EXPECT_TRUE(layer.weight_bf16.empty());
}

}  // namespace
}  // namespace fuserank::engine

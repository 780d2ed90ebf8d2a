// SgemmPacked (and the PackLayer / LayerForward wrappers) against a double-precision
// product written here, on each ISA path (AVX-512, AVX2, baseline; skipped with a
// message where the CPU lacks it), over edge sizes.
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_mlp.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/sgemm_check_util.h"

namespace fuserank::engine {
namespace {

using test::kPoison;

class SgemmTest
    : public testing::TestWithParam<std::tuple<int /*m*/, int /*n*/, int /*k*/, CpuIsa>> {
 protected:
  void SetUp() override {
    const CpuIsa isa = std::get<3>(GetParam());
    if (!CpuSupports(isa)) {
      GTEST_SKIP() << "this CPU lacks " << CpuIsaName(isa);
    }
    ForceCpuIsa(isa);
  }
  void TearDown() override { ForceCpuIsa(std::nullopt); }
};

TEST_P(SgemmTest, MatchesDoubleReference) {
  const auto [m, n, k, isa] = GetParam();
  const uint64_t seed = 7 + m * 1000003ull + n * 1009ull + k;
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // W [n, k_total] with extra columns: the packed layer picks k of them, reordered.
  const int k_total = k + 3;
  std::vector<int> columns(k);
  for (int p = 0; p < k; ++p) columns[p] = (p * 7 + 2) % k_total;
  std::vector<float> w(static_cast<size_t>(n) * k_total), bias(n);
  for (float& x : w) x = dist(rng);
  for (float& x : bias) x = dist(rng);
  const int lda = k + 5, ldc = n + 3;
  std::vector<float> a(static_cast<size_t>(std::max(m, 1)) * lda);
  for (float& x : a) x = dist(rng);

  const PackedMatrix packed = PackedMatrix::FromTransposed(w.data(), n, k, k_total, columns.data());
  ASSERT_EQ(packed.k(), k);
  ASSERT_EQ(packed.n(), n);
  ASSERT_TRUE(test::GemmMatchesDoubleProduct(
      m, n, k, [&](int i, int p) { return a[i * lda + p]; },
      [&](int j, int p) { return w[j * k_total + columns[p]]; }, bias.data(), ldc,
      [&](const float* b, bool relu, float* c) {
        SgemmPacked(m, a.data(), lda, packed, b, relu, c, ldc);
      }));
}

// C = x0 * (A B + bias) + xl as the GEMM stores C, with xl apart and with xl = C in place.
TEST_P(SgemmTest, CrossEpilogueMatchesDoubleReference) {
  const auto [m, n, k, isa] = GetParam();
  const uint64_t seed = 11 + m * 1000003ull + n * 1009ull + k;
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n) * k), bias(n);
  for (float& x : w) x = dist(rng);
  for (float& x : bias) x = dist(rng);
  const int lda = k + 2, ldc = n + 3, ld0 = n + 5, ldl = n + 1;
  const size_t rows = std::max(m, 1);
  std::vector<float> a(rows * lda), x0(rows * ld0), xl(rows * ldl);
  for (auto* v : {&a, &x0, &xl}) {
    for (float& x : *v) x = dist(rng);
  }
  const PackedMatrix packed = PackedMatrix::FromTransposed(w.data(), n, k, k);
  for (bool in_place : {false, true}) {
    std::vector<float> c(rows * ldc, kPoison);
    CrossEpilogue cross{x0.data(), ld0, xl.data(), ldl};
    if (in_place) {
      for (int i = 0; i < m; ++i) std::copy_n(&xl[i * ldl], n, &c[i * ldc]);
      cross.xl = c.data();
      cross.ld_xl = ldc;
    }
    SgemmPacked(m, a.data(), lda, packed, bias.data(), /*relu=*/false, c.data(), ldc, &cross);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double sum = bias[j], scale = 1.0;
        for (int p = 0; p < k; ++p) {
          const double term = static_cast<double>(a[i * lda + p]) * w[j * k + p];
          sum += term;
          scale += std::fabs(term);
        }
        const double want = x0[i * ld0 + j] * sum + xl[i * ldl + j];
        ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (scale + 1.0))
            << "i=" << i << " j=" << j << " in_place=" << in_place;
      }
      for (int j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], kPoison) << "wrote past n";
    }
  }
}

// m around both kernels' row blocks (6 for AVX2, 12 for AVX-512), n around one and two
// panels and an odd count of panels (600 = 37.5 panels, more than one bias chunk).
INSTANTIATE_TEST_SUITE_P(EdgeSizes, SgemmTest,
                         testing::Combine(testing::Values(0, 1, 5, 6, 7, 11, 12, 13, 25, 64),
                                          testing::Values(1, 15, 16, 17, 31, 32, 33, 48, 600),
                                          testing::Values(0, 1, 31, 383),
                                          testing::Values(CpuIsa::kGeneric, CpuIsa::kAvx2,
                                                          CpuIsa::kAvx512)),
                         [](const auto& info) {
                           return absl::StrCat(
                               "m", std::get<0>(info.param), "_n", std::get<1>(info.param), "_k",
                               std::get<2>(info.param), "_", CpuIsaName(std::get<3>(info.param)));
                         });

TEST(CpuMlpTest, LayerForwardUsesOwnOrGivenBias) {
  DenseLayer layer;
  layer.in = 3;
  layer.out = 2;
  layer.weight = {1, 2, 3, -4, -5, -6};
  layer.bias = {0.5f, 0.25f};
  const PackedLayer packed = PackLayer(layer, /*relu=*/true);
  const float x[3] = {1, 1, 1};
  float y[2];
  LayerForward(packed, 1, x, 3, y, 2);
  EXPECT_FLOAT_EQ(y[0], 6.5f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);  // ReLU of -14.75
  const float bias[2] = {-6.0f, 20.0f};
  LayerForward(packed, 1, x, 3, y, 2, bias);
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], 5.0f);
  const std::vector<int> columns = {2, 0};
  const PackedLayer picked = PackLayer(layer, /*relu=*/false, &columns, /*with_bias=*/false);
  const float x2[2] = {1, 10};  // reads W columns 2 and 0
  LayerForward(picked, 1, x2, 2, y, 2);
  EXPECT_FLOAT_EQ(y[0], 3 + 10 * 1);
  EXPECT_FLOAT_EQ(y[1], -6 + 10 * -4);
}

TEST(CpuMlpTest, SigmoidMatchesFormula) {
  const float x[4] = {0.0f, 2.0f, -30.0f, 30.0f};
  float y[2];
  Sigmoid(x, 2, 2, y);  // strided: x[0], x[2]
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_NEAR(y[1], 1.0 / (1.0 + std::exp(30.0)), 1e-12);
}

}  // namespace
}  // namespace fuserank::engine

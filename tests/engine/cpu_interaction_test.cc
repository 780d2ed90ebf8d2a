// DotInteraction / DotTerms against double-precision dots written here (DLRM pair order:
// i ascending, then j < i ascending), on both code paths.
#include "engine/cpu_interaction.h"

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "engine/cpu_simd.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

constexpr float kPoison = -9999.0f;

class DotInteractionTest
    : public testing::TestWithParam<std::tuple<int /*n*/, int /*d*/, bool /*generic*/>> {
 protected:
  void SetUp() override { ForceGenericCpuPaths(std::get<2>(GetParam())); }
  void TearDown() override { ForceGenericCpuPaths(false); }
};

TEST_P(DotInteractionTest, MatchesDoubleReference) {
  const auto [n, d, generic] = GetParam();
  const uint64_t seed = 5 + n * 100 + d;
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int rows = 5, v_stride = n * d + 3, pairs = n * (n - 1) / 2, out_stride = pairs + 2;
  std::vector<float> v(static_cast<size_t>(rows) * v_stride);
  for (float& x : v) x = dist(rng);
  std::vector<float> out(static_cast<size_t>(rows) * out_stride, kPoison);
  DotInteraction(v.data(), rows, n, d, v_stride, out.data(), out_stride);
  for (int c = 0; c < rows; ++c) {
    int p = 0;
    for (int i = 1; i < n; ++i) {
      for (int j = 0; j < i; ++j, ++p) {
        double want = 0, scale = 1;
        for (int l = 0; l < d; ++l) {
          const double term = static_cast<double>(v[c * v_stride + i * d + l]) *
                              v[c * v_stride + j * d + l];
          want += term;
          scale += std::fabs(term);
        }
        ASSERT_NEAR(out[c * out_stride + p], want, 1e-6 * scale) << "c=" << c << " pair " << p;
      }
    }
    for (int p2 = pairs; p2 < out_stride; ++p2) ASSERT_EQ(out[c * out_stride + p2], kPoison);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DotInteractionTest,
                         testing::Combine(testing::Values(1, 2, 5, 27),
                                          testing::Values(1, 7, 16, 17, 32, 64),
                                          testing::Bool()));

TEST(DotTermsTest, SharedSourceHasStrideZero) {
  // Source 0: per-row vectors [1, 2], [3, 4]; source 1: one shared vector [10, 100].
  const float rows[4] = {1, 2, 3, 4};
  const float shared[2] = {10, 100};
  const float* sources[2] = {rows, shared};
  const int strides[2] = {2, 0};
  const DotTerm terms[2] = {{0, 0, 1, 0}, {1, 0, 1, 0}};
  float out[4];
  DotTerms(terms, 2, 2, 2, sources, strides, out, 2);
  EXPECT_EQ(out[0], 210.0f);
  EXPECT_EQ(out[1], 10100.0f);
  EXPECT_EQ(out[2], 430.0f);
  EXPECT_EQ(out[3], 10100.0f);
}

}  // namespace
}  // namespace fuserank::engine

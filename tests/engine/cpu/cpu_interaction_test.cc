// DotInteraction / DotTerms against double-precision dots written here (DLRM pair order:
// i ascending, then j < i ascending), on both code paths; and the AVX2 path's masked dots
// bit for bit against the 16-lane arithmetic they keep.
#include "engine/cpu/cpu_interaction.h"

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "engine/cpu/cpu_simd.h"
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
          const double term =
              static_cast<double>(v[c * v_stride + i * d + l]) * v[c * v_stride + j * d + l];
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
                                          testing::Values(1, 7, 16, 17, 32, 64), testing::Bool()));

// Walks the dots DotGramRows writes to row c, in its documented order: for own vector o,
// its dots with the shared vectors, then with own vectors q < o. Calls dot(t, a, b) for
// output t of the row, the dot of a and b, and stops at a fatal failure. Returns the dots
// per row it walked.
template <typename Dot>
int ForEachGramDot(const float* shared, int num_shared, const float* own, int num_own,
                   int own_stride, int d, int c, Dot dot) {
  const float* v = own + c * own_stride;
  int t = 0;
  for (int o = 0; o < num_own; ++o) {
    for (int s = 0; s < num_shared + o; ++s, ++t) {
      const float* other = s < num_shared ? shared + s * d : v + (s - num_shared) * d;
      dot(t, v + o * d, other);
      if (testing::Test::HasFatalFailure()) return t;
    }
  }
  return t;
}

class DotGramRowsTest
    : public testing::TestWithParam<std::tuple<int /*shared*/, int /*own*/, int /*d*/, bool>> {
 protected:
  void SetUp() override { ForceGenericCpuPaths(std::get<3>(GetParam())); }
  void TearDown() override { ForceGenericCpuPaths(false); }
};

TEST_P(DotGramRowsTest, MatchesDoubleReferenceInDocumentedOrder) {
  const auto [num_shared, num_own, d, generic] = GetParam();
  const uint64_t seed = 11 + num_shared * 1000 + num_own * 100 + d;
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int rows = 4, own_stride = num_own * d + 5;
  const int width = num_own * num_shared + num_own * (num_own - 1) / 2, out_stride = width + 1;
  std::vector<float> shared(static_cast<size_t>(num_shared) * d + 1), own(rows * own_stride);
  for (float& x : shared) x = dist(rng);
  for (float& x : own) x = dist(rng);
  std::vector<float> out(static_cast<size_t>(rows) * out_stride, kPoison);
  DotGramRows(shared.data(), num_shared, own.data(), num_own, own_stride, d, rows, out.data(),
              out_stride);
  auto dot = [&](const float* a, const float* b, double* scale) {
    double sum = 0;
    for (int l = 0; l < d; ++l) {
      sum += static_cast<double>(a[l]) * b[l];
      *scale += std::fabs(static_cast<double>(a[l]) * b[l]);
    }
    return sum;
  };
  for (int c = 0; c < rows; ++c) {
    const int t = ForEachGramDot(shared.data(), num_shared, own.data(), num_own, own_stride, d, c,
                                 [&](int t, const float* a, const float* b) {
                                   double scale = 1;
                                   const double want = dot(a, b, &scale);
                                   ASSERT_NEAR(out[c * out_stride + t], want, 1e-6 * scale)
                                       << "row " << c << " t " << t;
                                 });
    if (HasFatalFailure()) return;
    ASSERT_EQ(t, width);
    ASSERT_EQ(out[c * out_stride + width], kPoison);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DotGramRowsTest,
                         testing::Combine(testing::Values(0, 1, 3, 8), testing::Values(1, 2, 19),
                                          testing::Values(1, 8, 12, 32), testing::Bool()));

// The AVX2 path's dots of widths that are not a multiple of 8, as the scalar code it
// replaced computed them (and so the scores served before it): 16 lanes, lane l summing
// elements l, l + 16, ... each with one FMA, then lanes l + 8 onto l, l + 4 onto l, and
// (0 + 2) + (1 + 3).
float SixteenLaneDot(const float* a, const float* b, int d) {
  float acc[16] = {};
  for (int j = 0; j < d; ++j) acc[j % 16] = std::fma(a[j], b[j], acc[j % 16]);
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

TEST(DotGramRowsBitsTest, TheAvx2PathSumsWidthsNotAMultipleOf8InSixteenFmaLanes) {
  if (!CpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: the path does not run";
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Ordinary values; tiny ones whose products round to zeros of either sign; and tiny
  // own vectors against tiny negative shared ones, whose every product rounds to -0 (a
  // lane that the last, partial chunk does not reach must keep its -0).
  for (const int kind : {0, 1, 2}) {
    const float scale = kind == 0 ? 1.0f : 1e-30f;
    for (int d = 1; d <= 72; ++d) {
      if (d % 8 == 0) continue;
      SCOPED_TRACE(testing::Message() << "d=" << d << " kind=" << kind);
      const int num_shared = 3, num_own = 4, rows = 2, own_stride = num_own * d + 3;
      const int width = num_own * num_shared + num_own * (num_own - 1) / 2;
      std::vector<float> shared(static_cast<size_t>(num_shared) * d), own(rows * own_stride);
      for (float& x : shared) x = kind == 2 ? -(std::fabs(dist(rng)) + 0.5f) * scale : dist(rng);
      for (float& x : own) {
        x = kind == 2 ? (std::fabs(dist(rng)) + 0.5f) * scale
                      : (rng() % 9 == 0 ? -0.0f : dist(rng) * scale);
      }
      std::vector<float> out(static_cast<size_t>(rows) * width);
      DotGramRows(shared.data(), num_shared, own.data(), num_own, own_stride, d, rows, out.data(),
                  width);
      for (int c = 0; c < rows; ++c) {
        ForEachGramDot(shared.data(), num_shared, own.data(), num_own, own_stride, d, c,
                       [&](int t, const float* a, const float* b) {
                         const float want = SixteenLaneDot(a, b, d);
                         const float got = out[c * width + t];
                         ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                             << "row " << c << " t " << t << ": " << got << " != " << want;
                       });
        if (HasFatalFailure()) return;
      }
    }
  }
}

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

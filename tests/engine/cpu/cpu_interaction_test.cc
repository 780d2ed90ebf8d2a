// DotInteraction / DotTerms against double-precision dots written here (DLRM pair order:
// i ascending, then j < i ascending), on every code path this CPU runs; and the
// matrix-product dots of the AVX2 and AVX-512 paths bit for bit against one FMA chain per
// dot in element order.
#include "engine/cpu/cpu_interaction.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_gram_dots.h"
#include "engine/cpu/cpu_simd.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/on_isa_test_util.h"

namespace fuserank::engine {
namespace {

constexpr float kPoison = -9999.0f;

using test::OnIsaTest;

const auto kAllIsas = testing::Values(CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512);

class DotInteractionTest : public OnIsaTest<std::tuple<int /*n*/, int /*d*/, CpuIsa>> {};

TEST_P(DotInteractionTest, MatchesDoubleReference) {
  const auto [n, d, isa] = GetParam();
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
                                          testing::Values(1, 7, 16, 17, 32, 64), kAllIsas));

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
    : public OnIsaTest<std::tuple<int /*shared*/, int /*own*/, int /*d*/, CpuIsa>> {};

TEST_P(DotGramRowsTest, MatchesDoubleReferenceInDocumentedOrder) {
  const auto [num_shared, num_own, d, isa] = GetParam();
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
  // Scratch of the right size, left full of NaNs: what it holds on entry must not matter,
  // and a call must not grow it.
  std::vector<float> scratch(DotGramScratchFloats(num_shared, num_own, d), std::nanf(""));
  const float* scratch_data = scratch.data();
  DotGramRows(shared.data(), num_shared, own.data(), num_own, own_stride, d, rows, out.data(),
              out_stride, &scratch);
  EXPECT_EQ(scratch.data(), scratch_data);
  EXPECT_EQ(scratch.size(), DotGramScratchFloats(num_shared, num_own, d));
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
                         testing::Combine(testing::Values(0, 1, 3, 8, 17),
                                          testing::Values(1, 2, 17, 19, 33),
                                          testing::Values(1, 8, 12, 32, 100), kAllIsas));

// The matrix-product paths' dots (engine/cpu/cpu_gram_dots.h): one FMA chain each, in
// element order, from +0 (the CUDA dot kernel's arithmetic).
float FmaChainDot(const float* a, const float* b, int d) {
  float sum = 0.0f;
  for (int j = 0; j < d; ++j) sum = std::fma(a[j], b[j], sum);
  return sum;
}

class DotGramRowsBitsTest : public OnIsaTest<CpuIsa> {};

TEST_P(DotGramRowsBitsTest, TheMatrixProductIsOneFmaChainPerDotInElementOrder) {
  const CpuIsa isa = GetParam();
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Shapes with one to five column vectors (every row block: eight rows of one vector,
  // four rows of one to four), with one and two whole blocks of own vectors turned into
  // columns in registers and vectors left over; widths within and past one chunk of those
  // transposes; products that round to zeros of either sign (kind 1: a chain that starts
  // from -0 instead of +0 fails there).
  const std::pair<int, int> shapes[] = {{0, 2},   {3, 4},  {8, 19},  {0, 17},
                                        {17, 21}, {5, 40}, {20, 40}, {30, 50}};
  std::vector<int> widths;
  for (int d = 1; d <= 40; ++d) widths.push_back(d);
  for (const int d : {48, 63, 64, 100, 128}) widths.push_back(d);
  int checked = 0;
  std::vector<float> scratch(5, std::nanf(""));  // grown by the calls, reused between them
  for (const int kind : {0, 1}) {
    for (const auto& [num_shared, num_own] : shapes) {
      for (const int d : widths) {
        if (isa == CpuIsa::kAvx2 && !Avx2TakesMatrixProduct(d)) continue;
        SCOPED_TRACE(testing::Message() << "d=" << d << " kind=" << kind << " shared=" << num_shared
                                        << " own=" << num_own);
        const int rows = 3, own_stride = num_own * d + 3;
        const int width = num_own * num_shared + num_own * (num_own - 1) / 2;
        const int out_stride = width + 2;
        std::vector<float> shared(static_cast<size_t>(num_shared) * d), own(rows * own_stride);
        for (float& x : shared) x = dist(rng);
        for (float& x : own) {
          x = rng() % 9 == 0 ? -0.0f : dist(rng) * (kind == 0 ? 1.0f : 1e-30f);
        }
        std::vector<float> out(static_cast<size_t>(rows) * out_stride, kPoison);
        DotGramRows(shared.data(), num_shared, own.data(), num_own, own_stride, d, rows, out.data(),
                    out_stride, &scratch);
        for (int c = 0; c < rows; ++c) {
          checked += ForEachGramDot(shared.data(), num_shared, own.data(), num_own, own_stride, d,
                                    c, [&](int t, const float* a, const float* b) {
                                      const float want = FmaChainDot(a, b, d);
                                      const float got = out[c * out_stride + t];
                                      ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                                          << "row " << c << " t " << t << ": " << got
                                          << " != " << want;
                                    });
          if (HasFatalFailure()) return;
          ASSERT_EQ(out[c * out_stride + width], kPoison) << "row " << c;
          ASSERT_EQ(out[c * out_stride + width + 1], kPoison) << "row " << c;
        }
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

INSTANTIATE_TEST_SUITE_P(Paths, DotGramRowsBitsTest,
                         testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx512),
                         [](const testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(CpuIsaName(info.param));
                         });

class DotGramRowsZeroWidthTest : public OnIsaTest<CpuIsa> {};

TEST_P(DotGramRowsZeroWidthTest, EveryDotIsZero) {
  const float shared[1] = {};
  const float own[1] = {};
  std::vector<float> out(2 * 3 + 3 + 1, kPoison), scratch;
  DotGramRows(shared, 2, own, 3, 0, 0, 1, out.data(), 9, &scratch);
  for (int t = 0; t < 9; ++t) EXPECT_EQ(out[t], 0.0f) << t;
  EXPECT_EQ(out[9], kPoison);
}

INSTANTIATE_TEST_SUITE_P(Paths, DotGramRowsZeroWidthTest, kAllIsas,
                         [](const testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(CpuIsaName(info.param));
                         });

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

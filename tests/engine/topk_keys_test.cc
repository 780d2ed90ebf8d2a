// The GPU top-K's sort keys, tested on the host without a GPU (kernels/topk_keys.h): they
// order scores descending and invert exactly, a stable sort of them is the engine's TopK
// (ties and NaNs included), NaNs sort after every number, saturation and scores match the
// CPU engine's, and the top-K shapes.
#include "kernels/topk_keys.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_mlp.h"
#include "engine/topk.h"
#include "gtest/gtest.h"
#include "kernels/layout_math.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

TEST(TopKKeysTest, KeysOrderScoresDescendingAndInvertExactly) {
  const float specials[] = {0.0f,
                            1.0f,
                            0.5f,
                            1e-30f,
                            1e-45f,
                            0.9999999f,
                            3.0f,
                            -2.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  std::vector<float> values(std::begin(specials), std::end(specials));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-20.0f, 20.0f);
  for (int i = 0; i < 2000; ++i) values.push_back(u(rng));
  for (float a : values) {
    const float back = kernels::ScoreFromDescendingKey(kernels::DescendingKey(a));
    ASSERT_EQ(std::memcmp(&a, &back, sizeof(a)), 0) << a;
    EXPECT_LT(kernels::DescendingKey(a), kernels::kPaddingKey) << a;
    for (float b : specials) {
      ASSERT_EQ(a > b, kernels::DescendingKey(a) < kernels::DescendingKey(b)) << a << " " << b;
      ASSERT_EQ(a == b, kernels::DescendingKey(a) == kernels::DescendingKey(b)) << a << " " << b;
    }
  }
}

// The GPU top-K is a stable ascending sort of (DescendingKey(sigmoid(logit)), index);
// on the host that must give exactly the CPU engine's TopK order, ties included.
TEST(TopKKeysTest, StableKeySortIsTheEngineTopK) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int n : {1, 2, 16, 129, 4096}) {
    std::vector<float> scores(n);
    for (float& s : scores) {
      // Few distinct logits (many ties), logits that saturate the sigmoid, and NaNs of
      // both signs (which rank last, by index).
      const int pick = static_cast<int>(rng() % 11);
      const float logit = pick < 9    ? static_cast<float>(pick - 4) * 7.0f
                          : pick == 9 ? std::numeric_limits<float>::quiet_NaN()
                                      : -std::numeric_limits<float>::quiet_NaN();
      s = kernels::Sigmoid(logit);
    }
    std::vector<std::pair<uint32_t, uint32_t>> keyed(n);
    for (int i = 0; i < n; ++i) keyed[i] = {kernels::DescendingKey(scores[i]), i};
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const int k = std::max(1, n / 3);
    std::vector<ScoredIndex> expected(k);
    TopK(scores.data(), n, k, expected.data());
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(keyed[i].second, expected[i].index) << "n " << n << " rank " << i;
      const float back = kernels::ScoreFromDescendingKey(keyed[i].first);
      if (std::isnan(expected[i].score)) {
        ASSERT_TRUE(std::isnan(back)) << "n " << n << " rank " << i;
      } else {
        ASSERT_EQ(back, expected[i].score);
      }
    }
  }
}

TEST(TopKKeysTest, EveryNanSortsAfterEveryNumberAndBeforePadding) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(),
                        kernels::BitsToFloat(0x7F800001u), kernels::BitsToFloat(0xFFFFFFFFu)};
  for (float nan : nans) {
    const uint32_t key = kernels::DescendingKey(nan);
    EXPECT_EQ(key, kernels::kNanKey) << kernels::FloatBits(nan);
    EXPECT_LT(key, kernels::kPaddingKey);
    for (float number : {-inf, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, inf}) {
      EXPECT_GT(key, kernels::DescendingKey(number)) << number;
    }
    EXPECT_TRUE(std::isnan(kernels::ScoreFromDescendingKey(key)));
  }
}

// The GPU saturates where its kernels write exactly as the CPU engine's stages do, and a
// logit's score is never NaN.
TEST(TopKKeysTest, SaturationAndScoresMatchTheCpuEngine) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {0.0f, -0.0f, 1.5f, -2.0f, 3.0e38f, -3.0e38f, inf, -inf, nan, -nan};
  std::vector<float> cpu = values;
  SaturateNonFinite(cpu.data(), 1, static_cast<int>(cpu.size()), static_cast<int>(cpu.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const float gpu = kernels::SaturateFinite(values[i]);
    EXPECT_EQ(std::memcmp(&gpu, &cpu[i], sizeof(float)), 0) << values[i];
    const float score = kernels::ScoreOfLogit(values[i]);
    EXPECT_FALSE(std::isnan(score)) << values[i];
    EXPECT_GE(score, 0.0f);
    EXPECT_LE(score, 1.0f);
  }
  EXPECT_EQ(kernels::ScoreOfLogit(inf), 1.0f);
  EXPECT_EQ(kernels::ScoreOfLogit(-inf), 0.0f);
  EXPECT_EQ(kernels::ScoreOfLogit(nan), 0.5f);
  EXPECT_EQ(kernels::ScoreOfLogit(1.25f), kernels::Sigmoid(1.25f));
}

TEST(TopKKeysTest, ShapeHoldsTheLongestRequest) {
  EXPECT_EQ(kernels::TopKShapeIndex(1), 0);
  EXPECT_EQ(kernels::TopKShapeIndex(32), 0);
  EXPECT_EQ(kernels::TopKShapeIndex(33), 1);
  EXPECT_EQ(kernels::TopKShapeIndex(128), 2);
  EXPECT_EQ(kernels::TopKShapeIndex(129), 3);
  EXPECT_EQ(kernels::TopKShapeIndex(1024), 5);  // 1024 candidates sort 1024 keys, not 2048
  EXPECT_EQ(kernels::TopKShapeIndex(1025), 6);
  EXPECT_EQ(kernels::TopKShapeIndex(4096), 7);
  EXPECT_EQ(kernels::TopKShapeIndex(5000), 7);  // over kMaxTopKSegment: ranked on the host
  // One shape per power of two: each holds twice the one before, the last kMaxTopKSegment.
  EXPECT_EQ(kernels::kTopKShapes[0].capacity(), 32);
  for (int s = 1; s < kernels::kNumTopKShapes; ++s) {
    EXPECT_EQ(kernels::kTopKShapes[s].capacity(), 2 * kernels::kTopKShapes[s - 1].capacity()) << s;
    EXPECT_EQ(kernels::kTopKShapes[s].threads % 32, 0) << "whole warps (coalesced loads)";
  }
  EXPECT_EQ(kernels::kTopKShapes[kernels::kNumTopKShapes - 1].capacity(),
            static_cast<int>(kernels::kMaxTopKSegment));
}

}  // namespace
}  // namespace fuserank::engine::cuda

// The CUDA kernels' launch arithmetic, tested on the host without a GPU
// (kernels/layout_math.h): candidate buckets, lookup lanes, the request of a candidate,
// and the dot interaction's pair order.
#include "kernels/layout_math.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

TEST(GpuLayoutMathTest, BucketsArePowersOfTwoFromTheMinimum) {
  EXPECT_EQ(kernels::CandidateBucket(0), 16u);
  EXPECT_EQ(kernels::CandidateBucket(1), 16u);
  EXPECT_EQ(kernels::CandidateBucket(16), 16u);
  EXPECT_EQ(kernels::CandidateBucket(17), 32u);
  EXPECT_EQ(kernels::CandidateBucket(4096), 4096u);
  EXPECT_EQ(kernels::CandidateBucket(4097), 8192u);
  EXPECT_EQ(kernels::BucketIndex(16), 0);
  EXPECT_EQ(kernels::BucketIndex(32), 1);
  EXPECT_EQ(kernels::BucketIndex(8192), 9);
  for (uint32_t n = 1; n < 70000; n += 37) {
    const uint32_t b = kernels::CandidateBucket(n);
    EXPECT_GE(b, n);
    EXPECT_EQ(b & (b - 1), 0u) << n;
    EXPECT_TRUE(b == 16 || b / 2 < n) << n;
  }
}

TEST(GpuLayoutMathTest, LanesCoverTheWidestRow) {
  EXPECT_TRUE(kernels::UseVectorLoads(4, 4));    // 16 B: one vector
  EXPECT_TRUE(kernels::UseVectorLoads(12, 4));   // 48 B
  EXPECT_TRUE(kernels::UseVectorLoads(100, 4));  // 400 B
  EXPECT_FALSE(kernels::UseVectorLoads(12, 2));  // 24 B
  EXPECT_FALSE(kernels::UseVectorLoads(4, 2));   // 8 B
  EXPECT_TRUE(kernels::UseVectorLoads(128, 2));  // 256 B
  EXPECT_EQ(kernels::RowUnits(32, 4), 8);
  EXPECT_EQ(kernels::RowUnits(100, 4), 25);
  EXPECT_EQ(kernels::RowUnits(12, 2), 12);  // element by element
  EXPECT_EQ(kernels::LookupLanes(1), 4);
  EXPECT_EQ(kernels::LookupLanes(8), 8);  // dim 32 fp32: 4 bags per warp
  EXPECT_EQ(kernels::LookupLanes(25), 32);
  EXPECT_EQ(kernels::LookupLanes(100), 32);  // wider rows loop inside the group
}

TEST(GpuLayoutMathTest, RequestOfCandidateMatchesALinearScan) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint32_t> begin{0};
    const int requests = 1 + static_cast<int>(rng() % 40);
    for (int r = 0; r < requests; ++r) begin.push_back(begin.back() + rng() % 5);  // empty too
    for (uint32_t c = 0; c < begin.back(); ++c) {
      uint32_t expected = 0;
      for (int r = 0; r < requests; ++r) {
        if (begin[r] <= c && c < begin[r + 1]) expected = r;
      }
      ASSERT_EQ(kernels::RequestOfCandidate(begin.data(), requests, c), expected) << c;
    }
  }
}

TEST(GpuLayoutMathTest, PairsFollowTheSpecOrder) {
  for (uint32_t n : {0u, 1u, 2u, 3u, 27u, 200u}) {
    uint32_t p = 0;
    for (uint32_t i = 1; i < n; ++i) {
      for (uint32_t j = 0; j < i; ++j, ++p) {
        uint32_t pi, pj;
        kernels::PairFromIndex(p, &pi, &pj);
        ASSERT_EQ(pi, i) << p;
        ASSERT_EQ(pj, j) << p;
      }
    }
    EXPECT_EQ(kernels::NumPairs(n), p);
  }
  // A lane's walk with stride 32 visits exactly pairs lane, lane + 32, ...
  for (uint32_t lane = 0; lane < 32; ++lane) {
    uint32_t i, j;
    kernels::PairFromIndex(lane, &i, &j);
    for (uint32_t p = lane; p < kernels::NumPairs(60); p += 32) {
      uint32_t ei, ej;
      kernels::PairFromIndex(p, &ei, &ej);
      ASSERT_EQ(i, ei);
      ASSERT_EQ(j, ej);
      kernels::AdvancePair(32, &i, &j);
    }
  }
}

}  // namespace
}  // namespace fuserank::engine::cuda

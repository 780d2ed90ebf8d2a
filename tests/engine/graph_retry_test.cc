#include "engine/cuda/graph_retry.h"

#include <vector>

#include "gtest/gtest.h"

namespace fuserank::engine::cuda {
namespace {

// Batches (1-based) of one key at which a capture is attempted, when every attempt fails.
std::vector<int> AttemptsWhenCaptureAlwaysFails(int batches) {
  GraphRetry retry;
  std::vector<int> attempts;
  for (int b = 1; b <= batches; ++b) {
    retry.RanEagerly();
    if (!retry.ShouldCapture()) continue;
    attempts.push_back(b);
    retry.CaptureFailed();
  }
  return attempts;
}

TEST(GraphRetryTest, TheFirstBatchIsCaptured) {
  GraphRetry retry;
  retry.RanEagerly();
  EXPECT_TRUE(retry.ShouldCapture());
  retry.CaptureSucceeded();
  EXPECT_EQ(retry.failures(), 0u);
}

TEST(GraphRetryTest, FailedCapturesAreRetriedWithDoublingGaps) {
  // Gaps of 1, 2, 4, 8, 16 eager batches after each failure.
  EXPECT_EQ(AttemptsWhenCaptureAlwaysFails(40), (std::vector<int>{1, 2, 4, 8, 16, 32}));
}

TEST(GraphRetryTest, TheGapStopsGrowingAtItsMaximum) {
  const std::vector<int> attempts = AttemptsWhenCaptureAlwaysFails(10000);
  ASSERT_GE(attempts.size(), 4u);
  const size_t n = attempts.size();
  EXPECT_EQ(attempts[n - 1] - attempts[n - 2], static_cast<int>(kMaxGraphRetryGap));
  EXPECT_EQ(attempts[n - 2] - attempts[n - 3], static_cast<int>(kMaxGraphRetryGap));
}

TEST(GraphRetryTest, ASuccessResetsTheBackoff) {
  GraphRetry retry;
  for (int i = 0; i < 5; ++i) retry.CaptureFailed();
  EXPECT_EQ(retry.failures(), 5u);
  retry.CaptureSucceeded();
  retry.RanEagerly();
  EXPECT_TRUE(retry.ShouldCapture());
}

}  // namespace
}  // namespace fuserank::engine::cuda

// The CUDA backend's warm-up batches: every (candidate bucket, top-K shape) a batch can
// reach is warmed exactly once, within the batch and request bounds, and the first batch
// is the largest staging of all (so the staging buffer never grows after a capture).
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "engine/cuda/warmup_batches.h"
#include "gtest/gtest.h"
#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"

namespace fuserank::engine {
namespace {

using Key = std::pair<uint32_t, int>;  // (candidate bucket, top-K shape)

// The key the CUDA worker runs a batch under (as cuda_worker.cc and the packer compute it).
Key KeyOf(const std::vector<int>& requests) {
  const int candidates = std::accumulate(requests.begin(), requests.end(), 0);
  const int longest = *std::max_element(requests.begin(), requests.end());
  const uint32_t bucket = kernels::CandidateBucket(
      static_cast<uint32_t>(std::max<size_t>(candidates, requests.size())));
  return {bucket, kernels::TopKShapeIndex(static_cast<uint32_t>(longest))};
}

// Every key some batch within the bounds can run under: a batch of `total` candidates can
// have any longest request from 1 to min(total, max_request).
std::set<Key> ReachableKeys(int max_batch, int max_request) {
  std::set<Key> keys;
  for (int total = 1; total <= max_batch; ++total) {
    const int longest = std::min(total, max_request);
    for (int s = 0; s <= kernels::TopKShapeIndex(static_cast<uint32_t>(longest)); ++s) {
      keys.insert({kernels::CandidateBucket(static_cast<uint32_t>(total)), s});
    }
  }
  return keys;
}

class CudaWarmupBatchesTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(CudaWarmupBatchesTest, WarmsEveryReachableKeyOnceWithinTheBounds) {
  const auto [max_batch, max_request] = GetParam();
  const std::vector<std::vector<int>> batches = CudaWarmupBatches(max_batch, max_request);
  ASSERT_FALSE(batches.empty());
  std::map<Key, int> warmed;
  for (const std::vector<int>& requests : batches) {
    ASSERT_FALSE(requests.empty());
    const int candidates = std::accumulate(requests.begin(), requests.end(), 0);
    EXPECT_LE(candidates, max_batch);
    for (int count : requests) {
      EXPECT_GE(count, 1);
      EXPECT_LE(count, max_request);
    }
    ++warmed[KeyOf(requests)];
  }
  const std::set<Key> reachable = ReachableKeys(max_batch, max_request);
  for (const Key& key : reachable) {
    EXPECT_EQ(warmed[key], 1) << "bucket " << key.first << ", top-K shape " << key.second;
  }
  EXPECT_EQ(warmed.size(), reachable.size()) << "a warm-up batch runs under an unreachable key";
}

TEST_P(CudaWarmupBatchesTest, TheFirstBatchIsTheLargestStagingAndBucketsGoDown) {
  const auto [max_batch, max_request] = GetParam();
  const std::vector<std::vector<int>> batches = CudaWarmupBatches(max_batch, max_request);
  ASSERT_FALSE(batches.empty());
  auto candidates = [](const std::vector<int>& r) {
    return std::accumulate(r.begin(), r.end(), 0);
  };
  for (const std::vector<int>& requests : batches) {
    EXPECT_LE(candidates(requests), candidates(batches[0]));
    EXPECT_LE(requests.size(), batches[0].size()) << "more requests than the first batch";
  }
  for (size_t b = 1; b < batches.size(); ++b) {
    EXPECT_LE(KeyOf(batches[b]).first, KeyOf(batches[b - 1]).first) << "batch " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Bounds, CudaWarmupBatchesTest,
                         ::testing::Values(std::pair{8192, 4096}, std::pair{8192, 8192},
                                           std::pair{1000, 256}, std::pair{16, 16},
                                           std::pair{64, 1}, std::pair{1, 1}, std::pair{300, 40}));

}  // namespace
}  // namespace fuserank::engine

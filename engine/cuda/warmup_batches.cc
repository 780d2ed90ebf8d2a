#include "engine/cuda/warmup_batches.h"

#include <algorithm>
#include <cstdint>

#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"

namespace fuserank::engine {
namespace {

// `total` candidates in requests of `longest` (the last one holds what is left).
std::vector<int> Requests(int total, int longest) {
  std::vector<int> sizes(static_cast<size_t>(total / longest), longest);
  if (total % longest != 0) sizes.push_back(total % longest);
  return sizes;
}

}  // namespace

std::vector<std::vector<int>> CudaWarmupBatches(int max_batch_candidates,
                                                int max_request_candidates) {
  const int max_batch = std::max(1, max_batch_candidates);
  const int max_request = std::max(1, max_request_candidates);
  std::vector<std::vector<int>> batches;
  const uint32_t largest = kernels::CandidateBucket(static_cast<uint32_t>(max_batch));
  for (uint32_t bucket = largest; bucket >= kernels::kMinCandidateBucket; bucket /= 2) {
    // Candidates that land in this bucket: (bucket / 2, bucket], or 1..16 for the first.
    const int total = std::min<int>(static_cast<int>(bucket), max_batch);
    int lowest = 1;  // the shortest longest-request of the shape
    for (int s = 0; s < kernels::kNumTopKShapes; ++s) {
      const int capacity = kernels::kTopKShapes[s].capacity();
      const int longest = std::min({capacity, total, max_request});
      if (longest >= lowest) batches.push_back(Requests(total, longest));
      lowest = capacity + 1;
    }
  }
  return batches;
}

}  // namespace fuserank::engine

// Segmented top-K: one block per request segment sorts (DescendingKey(ScoreOfLogit(logit)),
// index) with a block radix sort and writes the first min(top_k, count) pairs at the
// request's result offset. Launchers compile with the host compiler.
#ifndef FUSERANK_KERNELS_TOPK_H_
#define FUSERANK_KERNELS_TOPK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/descriptors.h"

namespace fuserank::kernels {

struct TopKArgs {
  const unsigned char* d_batch = nullptr;  // candidate_begin, top_k, result_begin
  const float* d_logits = nullptr;         // [candidates], the last layer's output
  ScoredPair* d_out = nullptr;             // [total_results]
  int shape = 0;                           // index into kTopKShapes (topk_keys.h)
  uint32_t max_requests = 0;               // grid bound (size bucket)
};

// Requests longer than kMaxTopKSegment are skipped (the host ranks them).
// max_requests == 0: returns at once.
cudaError_t LaunchSegmentedTopK(const TopKArgs& args, cudaStream_t stream);

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_TOPK_H_

// The only translation unit that includes CUB (nvcc is slow on it): a block radix sort
// per request segment, in four block shapes.
#include <cstdint>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>

#include "kernels/batch_layout.h"
#include "kernels/launch_error.h"
#include "kernels/topk.h"
#include "kernels/topk_keys.h"

namespace fuserank::kernels {
namespace {

constexpr uint32_t kMaxBlocks = 4096;  // segments beyond it are walked by a block loop

template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) SegmentedTopKKernel(const TopKArgs a) {
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems, uint32_t>;
  __shared__ typename Sort::TempStorage temp;
  constexpr uint32_t kCapacity = kThreads * kItems;
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t requests = h->num_requests;
  const uint32_t* candidate_begin = Section<uint32_t>(a.d_batch, h->candidate_begin);
  const uint32_t* top_k = Section<uint32_t>(a.d_batch, h->top_k);
  const uint32_t* result_begin = Section<uint32_t>(a.d_batch, h->result_begin);
  for (uint32_t r = blockIdx.x; r < requests; r += gridDim.x) {
    const uint32_t begin = candidate_begin[r];
    const uint32_t count = candidate_begin[r + 1] - begin;
    const uint32_t k = top_k[r];
    if (count > kCapacity || k == 0) continue;  // uniform across the block
    uint32_t keys[kItems];
    uint32_t values[kItems];
    // Blocked arrangement: thread t holds positions t * kItems + i, so the sort's input
    // order is index order and its stability breaks ties by index.
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const uint32_t pos = threadIdx.x * kItems + i;
      values[i] = pos;
      keys[i] = pos < count ? DescendingKey(ScoreOfLogit(a.d_logits[begin + pos])) : kPaddingKey;
    }
    Sort(temp).Sort(keys, values);
    ScoredPair* out = a.d_out + result_begin[r];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const uint32_t rank = threadIdx.x * kItems + i;
      if (rank < k) out[rank] = ScoredPair{values[i], ScoreFromDescendingKey(keys[i])};
    }
    __syncthreads();  // temp is reused by the next segment
  }
}

template <int kShape>
cudaError_t Launch(const TopKArgs& a, cudaStream_t stream) {
  constexpr TopKShape s = kTopKShapes[kShape];
  const uint32_t blocks = a.max_requests < kMaxBlocks ? a.max_requests : kMaxBlocks;
  ClearStaleLaunchError();
  SegmentedTopKKernel<s.threads, s.items><<<blocks, s.threads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSegmentedTopK(const TopKArgs& a, cudaStream_t stream) {
  if (a.max_requests == 0) return cudaSuccess;
  if (a.d_batch == nullptr || a.d_logits == nullptr || a.d_out == nullptr) {
    return cudaErrorInvalidValue;
  }
  static_assert(kNumTopKShapes == 4, "one case per shape");
  switch (a.shape) {
    case 0:
      return Launch<0>(a, stream);
    case 1:
      return Launch<1>(a, stream);
    case 2:
      return Launch<2>(a, stream);
    case 3:
      return Launch<3>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace fuserank::kernels

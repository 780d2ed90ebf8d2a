// The only translation unit that includes CUB (nvcc is slow on it): a block radix sort
// per request segment, in one block shape per power of two (topk_keys.h).
#include <array>
#include <cstdint>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <utility>

#include "kernels/batch_layout.h"
#include "kernels/launch_error.h"
#include "kernels/topk.h"
#include "kernels/topk_keys.h"

namespace fuserank::kernels {
namespace {

constexpr uint32_t kMaxBlocks = 4096;  // segments beyond it are walked by a block loop

template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) SegmentedTopKKernel(const TopKArgs a) {
  using Load = cub::BlockLoad<float, kThreads, kItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems, uint32_t>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Sort::TempStorage sort;
  } temp;
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
    // Coalesced: each warp reads consecutive logits and transposes them through shared
    // memory into the blocked arrangement (thread t holds positions t * kItems + i), so
    // the sort's input order is index order and its stability breaks ties by index.
    float logits[kItems];
    Load(temp.load).Load(a.d_logits + begin, logits, static_cast<int>(count), 0.0f);
    __syncthreads();  // temp.load is reused as temp.sort
    uint32_t keys[kItems];
    uint32_t values[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const uint32_t pos = threadIdx.x * kItems + i;
      values[i] = pos;
      keys[i] = pos < count ? DescendingKey(ScoreOfLogit(logits[i])) : kPaddingKey;
    }
    Sort(temp.sort).Sort(keys, values);
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

using LaunchFn = cudaError_t (*)(const TopKArgs&, cudaStream_t);

template <int... S>
constexpr std::array<LaunchFn, sizeof...(S)> Launchers(std::integer_sequence<int, S...>) {
  return {&Launch<S>...};
}

}  // namespace

cudaError_t LaunchSegmentedTopK(const TopKArgs& a, cudaStream_t stream) {
  if (a.max_requests == 0) return cudaSuccess;
  if (a.d_batch == nullptr || a.d_logits == nullptr || a.d_out == nullptr) {
    return cudaErrorInvalidValue;
  }
  static constexpr std::array<LaunchFn, kNumTopKShapes> kLaunchers =
      Launchers(std::make_integer_sequence<int, kNumTopKShapes>());
  if (a.shape < 0 || a.shape >= kNumTopKShapes) return cudaErrorInvalidValue;
  return kLaunchers[a.shape](a, stream);
}

}  // namespace fuserank::kernels

// The shared-memory staging experiment (kernels/smem_staging.h): one lane group per bag,
// one 16-byte vector per lane, as PooledLookupKernel's vector path, after the block has
// staged every table's hot rows and index.
#include <cstdint>

#include "kernels/batch_layout.h"
#include "kernels/launch_error.h"
#include "kernels/lookup_pool.h"
#include "kernels/smem_staging.h"

namespace fuserank::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kDefaultShared = 48 * 1024;
constexpr uint64_t kMaxBlocks = 1u << 20;

__host__ __device__ size_t IndexBytes(const StagedLookupArgs& a) {
  return sizeof(HotCacheEntry) * static_cast<size_t>(a.tables) * a.index_entries;
}
__host__ __device__ size_t RowsBytes(const StagedLookupArgs& a) {
  return static_cast<size_t>(a.tables) * a.staged_rows * a.row_bytes;
}

// HotCacheSlot over an index in shared memory (plain loads: __ldg is for global memory).
__device__ __forceinline__ int32_t SharedSlot(const HotCacheEntry* index, uint32_t mask,
                                              int32_t shift, int32_t row) {
  uint32_t i = (static_cast<uint32_t>(row) * kHotHashMultiplier) >> shift;
  for (;;) {
    const HotCacheEntry e = index[i];
    if (e.row == row) return e.slot;
    if (e.row == kHotEmpty) return -1;
    i = (i + 1) & mask;
  }
}

template <int kLanes>
__global__ void __launch_bounds__(kThreads) StagedLookupKernel(const StagedLookupArgs a) {
  extern __shared__ int4 staged[];
  // Stage: the indexes, then the rows, 16 bytes a thread at a time.
  const uint32_t index_vectors = static_cast<uint32_t>(IndexBytes(a) / 16);
  const uint32_t row_vectors = static_cast<uint32_t>(RowsBytes(a) / 16);
  const int4* index_src = reinterpret_cast<const int4*>(a.d_index);
  const int4* rows_src = reinterpret_cast<const int4*>(a.d_rows);
  for (uint32_t i = threadIdx.x; i < index_vectors; i += kThreads) staged[i] = __ldg(index_src + i);
  for (uint32_t i = threadIdx.x; i < row_vectors; i += kThreads) {
    staged[index_vectors + i] = __ldg(rows_src + i);
  }
  __syncthreads();
  const auto* s_index = reinterpret_cast<const HotCacheEntry*>(staged);
  const auto* s_rows = reinterpret_cast<const unsigned char*>(staged + index_vectors);
  const uint32_t mask = static_cast<uint32_t>(a.index_entries - 1);

  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t total = h->num_item_bags;
  const uint32_t* begin = Section<uint32_t>(a.d_batch, h->item_bag_begin);
  const int32_t* rows = Section<int32_t>(a.d_batch, h->item_rows);
  const float* weights = h->has_weights != 0 ? Section<float>(a.d_batch, h->item_weights) : nullptr;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const uint32_t groups = gridDim.x * (kThreads / kLanes);
  for (uint32_t task = (blockIdx.x * kThreads + threadIdx.x) / kLanes; task < total;
       task += groups) {
    const uint32_t table = task % static_cast<uint32_t>(a.tables);
    const uint32_t c = task / static_cast<uint32_t>(a.tables);
    const LookupTable t = a.d_tables[table];
    const HotCacheEntry* index = s_index + static_cast<size_t>(table) * a.index_entries;
    const unsigned char* table_staged =
        s_rows + static_cast<size_t>(table) * a.staged_rows * a.row_bytes;
    float* out = a.d_out + static_cast<size_t>(c) * a.out_ld + t.out_col;
    const int units = t.dim / 4;
    for (int v = lane; v < units; v += kLanes) {
      float acc[4] = {};
      float wsum = 0.0f;
      for (uint32_t j = begin[task]; j < begin[task + 1]; ++j) {
        const int32_t row = rows[j];
        const float w = weights != nullptr ? weights[j] : 1.0f;
        const int32_t slot = SharedSlot(index, mask, a.shift, row);
        const int4 q = slot >= 0 ? reinterpret_cast<const int4*>(
                                       table_staged + static_cast<size_t>(slot) * a.row_bytes)[v]
                                 : __ldg(reinterpret_cast<const int4*>(
                                             t.d_rows + static_cast<size_t>(row) * t.row_bytes) +
                                         v);
        lookup_pool::Row<RowType::kF32>::Add(q, {}, w, acc);
        wsum += w;
      }
      lookup_pool::StoreVector<4>(out, v, acc, wsum, t.mean != 0);
    }
  }
}

using StagedKernel = void (*)(StagedLookupArgs);

// The kernel compiled for `lanes` lanes a bag, or nullptr for another count.
StagedKernel KernelOfLanes(int lanes) {
  switch (lanes) {
    case 4:
      return StagedLookupKernel<4>;
    case 8:
      return StagedLookupKernel<8>;
    case 16:
      return StagedLookupKernel<16>;
    case 32:
      return StagedLookupKernel<32>;
    default:
      return nullptr;
  }
}

}  // namespace

size_t StagedLookupSharedBytes(const StagedLookupArgs& a) { return IndexBytes(a) + RowsBytes(a); }

cudaError_t AllowStagedLookupSharedBytes(size_t bytes) {
  if (bytes <= kDefaultShared) return cudaSuccess;
  for (int lanes : {4, 8, 16, 32}) {
    const cudaError_t err = cudaFuncSetAttribute(
        KernelOfLanes(lanes), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

int StagedLookupBlocksPerSm(const StagedLookupArgs& a) {
  const StagedKernel kernel = KernelOfLanes(a.lanes);
  int blocks = 0;
  if (kernel == nullptr ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads,
                                                    StagedLookupSharedBytes(a)) != cudaSuccess) {
    return 0;
  }
  return blocks;
}

cudaError_t LaunchStagedLookup(const StagedLookupArgs& a, cudaStream_t stream) {
  if (a.max_candidates == 0 || a.tables == 0) return cudaSuccess;
  const bool pow2 = a.index_entries > 0 && (a.index_entries & (a.index_entries - 1)) == 0;
  const StagedKernel kernel = KernelOfLanes(a.lanes);
  if (kernel == nullptr || a.d_batch == nullptr || a.d_tables == nullptr || a.d_out == nullptr ||
      a.tables < 0 || a.staged_rows < 0 || !pow2 || a.index_entries < 2 * a.staged_rows ||
      a.index_entries < 2 || a.row_bytes % 16 != 0 || (a.staged_rows > 0 && a.d_rows == nullptr) ||
      a.d_index == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int lanes = a.lanes;
  const uint64_t bags = uint64_t{a.max_candidates} * a.tables;
  uint64_t blocks = (bags + kThreads / lanes - 1) / (kThreads / lanes);
  if (a.max_blocks != 0 && blocks > a.max_blocks) blocks = a.max_blocks;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  ClearStaleLaunchError();
  kernel<<<static_cast<uint32_t>(blocks), kThreads, StagedLookupSharedBytes(a), stream>>>(a);
  return cudaGetLastError();
}

}  // namespace fuserank::kernels

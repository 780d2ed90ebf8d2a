// Fused pooled lookup: one lane group per bag, 16-byte row vectors where the row width
// allows, kUnroll rows in flight per lane before the first add, fp32 accumulation; with
// LookupArgs::prefetch_ids, a lane group reads the ids of several bags at once and issues
// their rows together (PrefetchingLookupKernel); with LookupArgs::d_hot, rows the table's
// HBM hot-row cache holds are read from it (PooledLookupKernel<..., kHot>). The row type
// (fp32, fp16, bf16, int8) is a template parameter of the kernel: the launcher picks the
// instantiation, and no branch on the type runs per bag or row.
#include <cstdint>

#include "kernels/batch_layout.h"
#include "kernels/launch_error.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"
#include "kernels/lookup_pool.h"

namespace fuserank::kernels {
namespace {

using lookup_pool::Bag;
using lookup_pool::PoolBag;
using lookup_pool::PoolBagFrom;
using lookup_pool::Row;
using lookup_pool::StoreVector;

constexpr int kThreads = 256;
// Where the bag's rows are read: the table, or the gathered unique rows (id reorder).
__device__ __forceinline__ void SetRowSource(Bag& bag, const LookupTable& t, const LookupArgs& a) {
  if (a.d_gathered != nullptr) {
    bag.base = a.d_gathered;
    bag.stride = a.gather_stride;
  } else {
    bag.base = t.d_rows;
    bag.stride = t.row_bytes;
  }
}

// Bag b of the item side (kItem: candidate b / item tables) or of the user side (request
// b / user tables): *bag, *t and *k, the table's index in d_tables.
template <bool kItem>
__device__ __forceinline__ void BagOf(const LookupArgs& a, const PackedHeader* h, uint32_t b,
                                      bool weighted, Bag* bag, LookupTable* t, int* k) {
  const uint32_t tables = kItem ? a.item_tables : a.user_tables;
  const uint32_t row = b / tables;  // the candidate (item) or request (user)
  const uint32_t table = (kItem ? a.user_tables : 0) + b % tables;
  *k = static_cast<int>(table);
  *t = a.d_tables[table];
  const uint32_t* begin =
      Section<uint32_t>(a.d_batch, kItem ? h->item_bag_begin : h->user_bag_begin);
  float* out = kItem ? a.d_item_out + static_cast<size_t>(row) * a.item_ld
                     : a.d_user_out + static_cast<size_t>(row) * a.user_ld;
  *bag =
      Bag{nullptr,
          0,
          Section<int32_t>(a.d_batch, kItem ? h->item_rows : h->user_rows),
          weighted ? Section<float>(a.d_batch, kItem ? h->item_weights : h->user_weights) : nullptr,
          begin[b],
          begin[b + 1],
          out + t->out_col};
  SetRowSource(*bag, *t, a);
}

// Task `task` of the launch: an item bag, a user bag (true: *bag, *t and *k, the table's
// index in d_tables, filled) or the dense row of a candidate (false: written here).
template <int kLanes>
__device__ __forceinline__ bool TakeTask(const LookupArgs& a, const PackedHeader* h, uint32_t task,
                                         bool weighted, int lane, Bag* bag, LookupTable* t,
                                         int* k) {
  const uint32_t item_bags = h->num_item_bags;
  const uint32_t user_bags = h->num_user_bags;
  if (task < item_bags) {
    BagOf<true>(a, h, task, weighted, bag, t, k);
    return true;
  }
  if (task < item_bags + user_bags) {
    BagOf<false>(a, h, task - item_bags, weighted, bag, t, k);
    return true;
  }
  const uint32_t c = task - item_bags - user_bags;
  const uint32_t r =
      RequestOfCandidate(Section<uint32_t>(a.d_batch, h->candidate_begin), h->num_requests, c);
  const float* user =
      Section<float>(a.d_batch, h->user_dense) + static_cast<size_t>(r) * a.dense_user;
  const float* item =
      Section<float>(a.d_batch, h->item_dense) + static_cast<size_t>(c) * a.dense_item;
  float* out = a.d_dense_out + static_cast<size_t>(c) * a.dense_ld;
  for (int e = lane; e < a.dense_user + a.dense_item; e += kLanes) {
    out[e] = e < a.dense_user ? user[e] : item[e - a.dense_user];
  }
  return false;
}

// Every table of a model has the one row type T (its embedding dtype): one lane group per
// task, one task after another. kHot (LookupArgs::d_hot, cache.placement: host): a row the
// table's HBM hot-row cache holds is read from device memory, any other from the table's
// mapped host rows; lane 0 of each lane group adds its bag's ids to the block's per-table
// counts in shared memory, and the block adds them to the launch's counters at its end.
template <int kLanes, RowType T, bool kHot>
__global__ void __launch_bounds__(kThreads) PooledLookupKernel(const LookupArgs a) {
  extern __shared__ unsigned int counts[];  // kHot: [table][served from the cache, not]
  const int counted = kHot ? 2 * (a.user_tables + a.item_tables) : 0;
  if constexpr (kHot) {
    for (int i = static_cast<int>(threadIdx.x); i < counted; i += kThreads) counts[i] = 0;
    __syncthreads();
  }
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t dense_tasks = a.d_dense_out != nullptr ? h->num_candidates : 0;
  const uint32_t total = h->num_item_bags + h->num_user_bags + dense_tasks;
  const bool weighted = h->has_weights != 0;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const uint32_t groups = gridDim.x * (kThreads / kLanes);
  for (uint32_t task = (blockIdx.x * kThreads + threadIdx.x) / kLanes; task < total;
       task += groups) {
    Bag bag;
    LookupTable t;
    int k;
    if (TakeTask<kLanes>(a, h, task, weighted, lane, &bag, &t, &k)) {
      if constexpr (kHot) {
        const HotCacheTable hot = a.d_hot[k];  // in registers for the bag's probes
        const uint32_t hits = PoolBagFrom<T, true>(bag, hot, t, lane, kLanes);
        if (lane == 0) {
          atomicAdd(&counts[2 * k], hits);
          atomicAdd(&counts[2 * k + 1], bag.end - bag.begin - hits);
        }
      } else {
        PoolBag<T>(bag, t, lane, kLanes);
      }
    }
  }
  if constexpr (kHot) {
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < counted; i += kThreads) {
      if (counts[i] != 0) atomicAdd(a.d_hot_counts + i, static_cast<unsigned long long>(counts[i]));
    }
  }
}

// Tasks a lane group of kLanes takes per step in PrefetchingLookupKernel: one per lane,
// at most 8 (each lane holds one 16-byte row vector per task until it is added).
template <int kLanes>
constexpr int kGroupTasks = kLanes < 8 ? kLanes : 8;

// Where a lane group's task stands after the index pass: a bag of at most one id whose row
// is one vector per lane of the group ("simple": pooled from the prefetched row), or
// anything else (a longer bag, a wide or element-path row, a dense row: PooledLookup's
// path).
struct TaskIndex {
  const unsigned char* row = nullptr;  // the bag's one row; nullptr: the bag is empty
  float* out = nullptr;
  float w = 0.0f;
  int32_t dim = 0;
  int32_t mean = 0;
  bool simple = true;  // also for a lane with no task
};

// The index pass for task `task`: its table, its bag bounds and, for a bag of one id, the
// id and the row's address. Reads two to four words; no row data.
template <int kLanes, RowType T>
__device__ __forceinline__ TaskIndex IndexTask(const LookupArgs& a, const PackedHeader* h,
                                               uint32_t task, bool weighted) {
  TaskIndex x;
  const uint32_t item_bags = h->num_item_bags;
  if (task >= item_bags + h->num_user_bags) {  // a dense row
    x.simple = false;
    return x;
  }
  const bool item = task < item_bags;
  const uint32_t b = item ? task : task - item_bags;
  const int tables = item ? a.item_tables : a.user_tables;
  const uint32_t r = b / tables;
  const LookupTable t = a.d_tables[(item ? a.user_tables : 0) + b % tables];
  const uint32_t* begin =
      Section<uint32_t>(a.d_batch, item ? h->item_bag_begin : h->user_bag_begin);
  const uint32_t first = begin[b];
  const uint32_t end = begin[b + 1];
  const int units = t.dim * Row<T>::kElemBytes / 16;
  x.simple = t.vector && units <= kLanes && end - first <= 1;
  if (!x.simple) return x;
  x.dim = t.dim;
  x.mean = t.mean;
  x.out = (item ? a.d_item_out + static_cast<size_t>(r) * a.item_ld
                : a.d_user_out + static_cast<size_t>(r) * a.user_ld) +
          t.out_col;
  if (end > first) {
    const int32_t id = Section<int32_t>(a.d_batch, item ? h->item_rows : h->user_rows)[first];
    const float* weights =
        weighted ? Section<float>(a.d_batch, item ? h->item_weights : h->user_weights) : nullptr;
    x.w = weights != nullptr ? weights[first] : 1.0f;
    x.row = a.d_gathered != nullptr ? a.d_gathered + static_cast<size_t>(id) * a.gather_stride
                                    : t.d_rows + static_cast<size_t>(id) * t.row_bytes;
  }
  return x;
}

// PooledLookupKernel with the ids read ahead: a lane group takes kGroupTasks consecutive
// tasks per step; lane l reads task l's bag bounds and (for a bag of one id) its id, so the
// group reads its indices in one round trip, coalesced, instead of one task after another;
// then every lane issues its vector of each simple task's row before adding any (up to 8
// row loads in flight per lane, against one). Other tasks then run PooledLookupKernel's
// path. A simple bag is pooled with the same operations as there (one fused multiply-add
// from zero, the same Finish), so every value has the same bits. The loop is uniform over
// the warp (the shuffles need every lane).
template <int kLanes, RowType T>
__global__ void __launch_bounds__(kThreads) PrefetchingLookupKernel(const LookupArgs a) {
  using R = Row<T>;
  constexpr int kG = kGroupTasks<kLanes>;
  constexpr int kGroupsPerWarp = 32 / kLanes;
  constexpr uint32_t kPerWarp = kGroupsPerWarp * kG;
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const uint32_t dense_tasks = a.d_dense_out != nullptr ? h->num_candidates : 0;
  const uint32_t total = h->num_item_bags + h->num_user_bags + dense_tasks;
  const bool weighted = h->has_weights != 0;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const uint32_t group_in_warp = (threadIdx.x % 32) / kLanes;
  const uint32_t warp = (blockIdx.x * kThreads + threadIdx.x) / 32;
  const uint32_t warps = gridDim.x * (kThreads / 32);
  for (uint32_t base = warp * kPerWarp; base < total; base += warps * kPerWarp) {
    const uint32_t first = base + group_in_warp * kG;
    const uint32_t mine = first + static_cast<uint32_t>(lane);
    TaskIndex x;
    if (lane < kG && mine < total) x = IndexTask<kLanes, T>(a, h, mine, weighted);
    // Every lane's vector of every simple task's row, all issued before the first add.
    int4 q[kG];
    typename R::Params p[kG];
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const auto row = reinterpret_cast<const unsigned char*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(x.row), j, kLanes));
      const int dim = __shfl_sync(0xffffffffu, x.dim, j, kLanes);
      const bool simple = __shfl_sync(0xffffffffu, x.simple ? 1 : 0, j, kLanes) != 0;
      if (simple && row != nullptr && lane < dim * R::kElemBytes / 16) {
        q[j] = __ldg(reinterpret_cast<const int4*>(row) + lane);
        p[j] = R::LoadParams(row, dim);
      }
    }
    uint32_t slow = 0;  // tasks of this group that take the general path
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const auto row = reinterpret_cast<const unsigned char*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(x.row), j, kLanes));
      const auto out = reinterpret_cast<float*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(x.out), j, kLanes));
      const int dim = __shfl_sync(0xffffffffu, x.dim, j, kLanes);
      const bool mean = __shfl_sync(0xffffffffu, x.mean, j, kLanes) != 0;
      const float w = __shfl_sync(0xffffffffu, x.w, j, kLanes);
      const bool simple = __shfl_sync(0xffffffffu, x.simple ? 1 : 0, j, kLanes) != 0;
      if (!simple) {
        slow |= 1u << j;
        continue;
      }
      if (out == nullptr || lane >= dim * R::kElemBytes / 16) continue;  // no task, or no vector
      float acc[R::kPerVector] = {};
      float wsum = 0.0f;
      if (row != nullptr) {
        R::Add(q[j], p[j], w, acc);
        wsum += w;
      }
      StoreVector<R::kPerVector>(out, lane, acc, wsum, mean != 0);
    }
    for (int j = 0; j < kG; ++j) {
      const uint32_t task = first + static_cast<uint32_t>(j);
      if ((slow >> j & 1u) == 0 || task >= total) continue;
      Bag bag;
      LookupTable t;
      int k;
      if (TakeTask<kLanes>(a, h, task, weighted, lane, &bag, &t, &k)) {
        PoolBag<T>(bag, t, lane, kLanes);
      }
    }
  }
}

// A warp per unique row, 16-, 4- or 2-byte units as the row width allows.
__global__ void __launch_bounds__(kThreads) GatherUniqueRowsKernel(const GatherArgs a) {
  const PackedHeader* h = reinterpret_cast<const PackedHeader*>(a.d_batch);
  const UniqueRow* unique = Section<UniqueRow>(a.d_batch, h->unique_rows);
  const uint32_t n = h->num_unique;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t warps = gridDim.x * (kThreads / 32);
  for (uint32_t s = (blockIdx.x * kThreads + threadIdx.x) / 32; s < n; s += warps) {
    const UniqueRow u = unique[s];
    const LookupTable& t = a.d_tables[u.table];
    const unsigned char* src = t.d_rows + static_cast<size_t>(u.row) * t.row_bytes;
    unsigned char* dst = a.d_gathered + static_cast<size_t>(s) * a.stride;
    if (t.row_bytes % 16 == 0) {
      for (uint32_t k = lane; k < t.row_bytes / 16; k += 32) {
        reinterpret_cast<int4*>(dst)[k] = __ldg(reinterpret_cast<const int4*>(src) + k);
      }
    } else if (t.row_bytes % 4 == 0) {
      for (uint32_t k = lane; k < t.row_bytes / 4; k += 32) {
        reinterpret_cast<uint32_t*>(dst)[k] = __ldg(reinterpret_cast<const unsigned int*>(src) + k);
      }
    } else {
      for (uint32_t k = lane; k < t.row_bytes / 2; k += 32) {
        reinterpret_cast<uint16_t*>(dst)[k] =
            __ldg(reinterpret_cast<const unsigned short*>(src) + k);
      }
    }
  }
}

constexpr uint64_t kMaxBlocks = 1u << 20;  // the grid-stride loops cover anything beyond

uint32_t Blocks(uint64_t groups, int groups_per_block) {
  const uint64_t blocks = (groups + groups_per_block - 1) / groups_per_block;
  return static_cast<uint32_t>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <int kLanes, RowType T>
void LaunchOfShape(const LookupArgs& a, uint64_t tasks, cudaStream_t stream) {
  if (a.d_hot != nullptr) {
    const size_t shared = 2 * sizeof(unsigned int) * (a.user_tables + a.item_tables);
    PooledLookupKernel<kLanes, T, true>
        <<<Blocks(tasks, kThreads / kLanes), kThreads, shared, stream>>>(a);
  } else if (a.prefetch_ids) {
    const uint64_t groups = (tasks + kGroupTasks<kLanes> - 1) / kGroupTasks<kLanes>;
    PrefetchingLookupKernel<kLanes, T>
        <<<Blocks(groups, kThreads / kLanes), kThreads, 0, stream>>>(a);
  } else {
    PooledLookupKernel<kLanes, T, false>
        <<<Blocks(tasks, kThreads / kLanes), kThreads, 0, stream>>>(a);
  }
}

template <RowType T>
cudaError_t LaunchOfType(const LookupArgs& a, uint64_t tasks, cudaStream_t stream) {
  switch (a.lanes) {
    case 4:
      LaunchOfShape<4, T>(a, tasks, stream);
      break;
    case 8:
      LaunchOfShape<8, T>(a, tasks, stream);
      break;
    case 16:
      LaunchOfShape<16, T>(a, tasks, stream);
      break;
    case 32:
      LaunchOfShape<32, T>(a, tasks, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPooledLookup(const LookupArgs& a, cudaStream_t stream) {
  if (a.max_candidates == 0) return cudaSuccess;
  if (a.d_batch == nullptr || a.user_tables < 0 || a.item_tables < 0 ||
      (a.user_tables + a.item_tables > 0 && a.d_tables == nullptr) ||
      (a.item_tables > 0 && a.d_item_out == nullptr) ||
      (a.user_tables > 0 && a.d_user_out == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (a.d_hot != nullptr &&
      (a.d_hot_counts == nullptr || a.d_gathered != nullptr || a.prefetch_ids ||
       a.user_tables + a.item_tables > kMaxHotCountedTables)) {
    return cudaErrorInvalidValue;
  }
  const uint64_t tasks = uint64_t{a.max_candidates} * a.item_tables +
                         uint64_t{a.max_requests} * a.user_tables +
                         (a.d_dense_out != nullptr ? a.max_candidates : 0);
  if (tasks == 0) return cudaSuccess;
  ClearStaleLaunchError();
  switch (a.row_type) {
    case RowType::kF32:
      return LaunchOfType<RowType::kF32>(a, tasks, stream);
    case RowType::kF16:
      return LaunchOfType<RowType::kF16>(a, tasks, stream);
    case RowType::kBF16:
      return LaunchOfType<RowType::kBF16>(a, tasks, stream);
    case RowType::kInt8:
      return LaunchOfType<RowType::kInt8>(a, tasks, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchGatherUniqueRows(const GatherArgs& a, cudaStream_t stream) {
  if (a.max_unique == 0) return cudaSuccess;
  if (a.d_batch == nullptr || a.d_tables == nullptr || a.d_gathered == nullptr ||
      a.stride % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  ClearStaleLaunchError();
  GatherUniqueRowsKernel<<<Blocks(a.max_unique, kThreads / 32), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace fuserank::kernels

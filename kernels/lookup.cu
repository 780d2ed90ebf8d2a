// Fused pooled lookup: one lane group per bag, 16-byte row vectors where the row width
// allows, kUnroll rows in flight per lane before the first add, fp32 accumulation; with
// LookupArgs::prefetch_ids, a lane group reads the ids of several bags at once and issues
// their rows together (PrefetchingLookupKernel). The row type (fp32, fp16, bf16, int8) is a
// template parameter of the kernel: the launcher picks the instantiation, and no branch on
// the type runs per bag or row.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/batch_layout.h"
#include "kernels/int8_rows.h"
#include "kernels/launch_error.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"
#include "kernels/saturate.h"

namespace fuserank::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // independent row loads issued before their adds

__device__ __forceinline__ float Bf16Lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float Bf16Hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
__device__ __forceinline__ float2 F16Pair(uint32_t w) {
  __half2 h;
  static_assert(sizeof(h) == sizeof(w), "half2 is one word");
  memcpy(&h, &w, sizeof(w));
  return __half22float2(h);
}

// Per row type: the row's decode parameters (int8: scale and bias, read once per row),
// one element, and one 16-byte vector added into kPerVector accumulators (w * x with one
// fused multiply-add per element).
struct NoParams {};

template <RowType T>
struct Row;
template <>
struct Row<RowType::kF32> {
  static constexpr int kPerVector = 4;
  static constexpr int kElemBytes = 4;
  using Params = NoParams;
  __device__ static Params LoadParams(const unsigned char*, int) { return {}; }
  __device__ static float Element(const unsigned char* row, int e, Params) {
    return __ldg(reinterpret_cast<const float*>(row) + e);
  }
  __device__ static void Add(int4 q, Params, float w, float* acc) {
    acc[0] = fmaf(w, __int_as_float(q.x), acc[0]);
    acc[1] = fmaf(w, __int_as_float(q.y), acc[1]);
    acc[2] = fmaf(w, __int_as_float(q.z), acc[2]);
    acc[3] = fmaf(w, __int_as_float(q.w), acc[3]);
  }
};
template <>
struct Row<RowType::kF16> {
  static constexpr int kPerVector = 8;
  static constexpr int kElemBytes = 2;
  using Params = NoParams;
  __device__ static Params LoadParams(const unsigned char*, int) { return {}; }
  __device__ static float Element(const unsigned char* row, int e, Params) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(row) + e)));
  }
  __device__ static void Add(int4 q, Params, float w, float* acc) {
    const uint32_t words[4] = {static_cast<uint32_t>(q.x), static_cast<uint32_t>(q.y),
                               static_cast<uint32_t>(q.z), static_cast<uint32_t>(q.w)};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = F16Pair(words[k]);
      acc[2 * k] = fmaf(w, f.x, acc[2 * k]);
      acc[2 * k + 1] = fmaf(w, f.y, acc[2 * k + 1]);
    }
  }
};
template <>
struct Row<RowType::kBF16> {
  static constexpr int kPerVector = 8;
  static constexpr int kElemBytes = 2;
  using Params = NoParams;
  __device__ static Params LoadParams(const unsigned char*, int) { return {}; }
  __device__ static float Element(const unsigned char* row, int e, Params) {
    const uint32_t bits = __ldg(reinterpret_cast<const unsigned short*>(row) + e);
    return __uint_as_float(bits << 16);
  }
  __device__ static void Add(int4 q, Params, float w, float* acc) {
    const uint32_t words[4] = {static_cast<uint32_t>(q.x), static_cast<uint32_t>(q.y),
                               static_cast<uint32_t>(q.z), static_cast<uint32_t>(q.w)};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      acc[2 * k] = fmaf(w, Bf16Lo(words[k]), acc[2 * k]);
      acc[2 * k + 1] = fmaf(w, Bf16Hi(words[k]), acc[2 * k + 1]);
    }
  }
};
template <>
struct Row<RowType::kInt8> {
  static constexpr int kPerVector = 16;
  static constexpr int kElemBytes = 1;
  using Params = float2;  // (scale, bias)
  __device__ static Params LoadParams(const unsigned char* row, int dim) {
    return __ldg(reinterpret_cast<const float2*>(row + Int8ParamsOffset(dim)));
  }
  __device__ static float Element(const unsigned char* row, int e, Params p) {
    return DequantizeInt8(static_cast<int8_t>(__ldg(reinterpret_cast<const signed char*>(row) + e)),
                          p.x, p.y);
  }
  __device__ static void Add(int4 q, Params p, float w, float* acc) {
    const uint32_t words[4] = {static_cast<uint32_t>(q.x), static_cast<uint32_t>(q.y),
                               static_cast<uint32_t>(q.z), static_cast<uint32_t>(q.w)};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int8_t code = static_cast<int8_t>(static_cast<uint8_t>(words[k] >> (8 * b)));
        acc[4 * k + b] = fmaf(w, DequantizeInt8(code, p.x, p.y), acc[4 * k + b]);
      }
    }
  }
};

// Where one bag's ids and rows are, and where its pooled vector goes.
struct Bag {
  const unsigned char* base;  // table rows, or the gathered unique rows
  uint32_t stride;            // bytes from one row (or slot) to the next
  const int32_t* rows;
  const float* weights;  // nullptr: every weight is 1
  uint32_t begin;
  uint32_t end;
  float* out;
};

// The pooled value, saturated (engine::SaturateNonFinite, as the CPU after pooling).
__device__ __forceinline__ float Finish(float acc, float wsum, bool mean) {
  if (!mean) return SaturateFinite(acc);
  return wsum != 0.0f ? SaturateFinite(acc / wsum) : 0.0f;
}

// Writes vector v of a pooled row: 16-byte stores where the output allows.
template <int kE>
__device__ __forceinline__ void StoreVector(float* row_out, int v, const float* acc, float wsum,
                                            bool mean) {
  float* out = row_out + v * kE;
  if ((reinterpret_cast<uintptr_t>(out) & 15) == 0) {
#pragma unroll
    for (int k = 0; k < kE; k += 4) {
      *reinterpret_cast<float4*>(out + k) =
          make_float4(Finish(acc[k], wsum, mean), Finish(acc[k + 1], wsum, mean),
                      Finish(acc[k + 2], wsum, mean), Finish(acc[k + 3], wsum, mean));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kE; ++k) out[k] = Finish(acc[k], wsum, mean);
  }
}

template <RowType T>
__device__ void PoolVectors(const Bag& bag, int dim, int units, bool mean, int lane, int lanes) {
  using R = Row<T>;
  constexpr int kE = R::kPerVector;
  for (int v = lane; v < units; v += lanes) {
    float acc[kE] = {};
    float wsum = 0.0f;
    uint32_t j = bag.begin;
    for (; j + kUnroll <= bag.end; j += kUnroll) {
      int4 q[kUnroll];
      typename R::Params p[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const unsigned char* row = bag.base + static_cast<size_t>(bag.rows[j + u]) * bag.stride;
        w[u] = bag.weights != nullptr ? bag.weights[j + u] : 1.0f;
        q[u] = __ldg(reinterpret_cast<const int4*>(row) + v);
        p[u] = R::LoadParams(row, dim);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        R::Add(q[u], p[u], w[u], acc);
        wsum += w[u];
      }
    }
    for (; j < bag.end; ++j) {
      const unsigned char* row = bag.base + static_cast<size_t>(bag.rows[j]) * bag.stride;
      const float w = bag.weights != nullptr ? bag.weights[j] : 1.0f;
      R::Add(__ldg(reinterpret_cast<const int4*>(row) + v), R::LoadParams(row, dim), w, acc);
      wsum += w;
    }
    StoreVector<kE>(bag.out, v, acc, wsum, mean);
  }
}

template <RowType T>
__device__ void PoolElements(const Bag& bag, int dim, bool mean, int lane, int lanes) {
  using R = Row<T>;
  for (int e = lane; e < dim; e += lanes) {
    float acc = 0.0f;
    float wsum = 0.0f;
    uint32_t j = bag.begin;
    for (; j + kUnroll <= bag.end; j += kUnroll) {
      float x[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const unsigned char* row = bag.base + static_cast<size_t>(bag.rows[j + u]) * bag.stride;
        w[u] = bag.weights != nullptr ? bag.weights[j + u] : 1.0f;
        x[u] = R::Element(row, e, R::LoadParams(row, dim));
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc = fmaf(w[u], x[u], acc);
        wsum += w[u];
      }
    }
    for (; j < bag.end; ++j) {
      const unsigned char* row = bag.base + static_cast<size_t>(bag.rows[j]) * bag.stride;
      const float w = bag.weights != nullptr ? bag.weights[j] : 1.0f;
      acc = fmaf(w, R::Element(row, e, R::LoadParams(row, dim)), acc);
      wsum += w;
    }
    bag.out[e] = Finish(acc, wsum, mean);
  }
}

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

template <RowType T>
__device__ void PoolBag(const Bag& bag, const LookupTable& t, int lane, int lanes) {
  if (t.vector) {
    PoolVectors<T>(bag, t.dim, t.dim * Row<T>::kElemBytes / 16, t.mean != 0, lane, lanes);
  } else {
    PoolElements<T>(bag, t.dim, t.mean != 0, lane, lanes);
  }
}

// Task `task` of the launch: an item bag, a user bag (true: *bag and *t filled) or the
// dense row of a candidate (false: written here).
template <int kLanes>
__device__ __forceinline__ bool TakeTask(const LookupArgs& a, const PackedHeader* h, uint32_t task,
                                         bool weighted, int lane, Bag* bag, LookupTable* t) {
  const uint32_t item_bags = h->num_item_bags;
  const uint32_t user_bags = h->num_user_bags;
  if (task < item_bags) {
    const uint32_t c = task / a.item_tables;
    *t = a.d_tables[a.user_tables + task % a.item_tables];
    const uint32_t* begin = Section<uint32_t>(a.d_batch, h->item_bag_begin);
    *bag = Bag{nullptr,
               0,
               Section<int32_t>(a.d_batch, h->item_rows),
               weighted ? Section<float>(a.d_batch, h->item_weights) : nullptr,
               begin[task],
               begin[task + 1],
               a.d_item_out + static_cast<size_t>(c) * a.item_ld + t->out_col};
    SetRowSource(*bag, *t, a);
    return true;
  }
  if (task < item_bags + user_bags) {
    const uint32_t b = task - item_bags;
    const uint32_t r = b / a.user_tables;
    *t = a.d_tables[b % a.user_tables];
    const uint32_t* begin = Section<uint32_t>(a.d_batch, h->user_bag_begin);
    *bag = Bag{nullptr,
               0,
               Section<int32_t>(a.d_batch, h->user_rows),
               weighted ? Section<float>(a.d_batch, h->user_weights) : nullptr,
               begin[b],
               begin[b + 1],
               a.d_user_out + static_cast<size_t>(r) * a.user_ld + t->out_col};
    SetRowSource(*bag, *t, a);
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
// task, one task after another.
template <int kLanes, RowType T>
__global__ void __launch_bounds__(kThreads) PooledLookupKernel(const LookupArgs a) {
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
    if (TakeTask<kLanes>(a, h, task, weighted, lane, &bag, &t)) PoolBag<T>(bag, t, lane, kLanes);
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
      if (TakeTask<kLanes>(a, h, task, weighted, lane, &bag, &t)) PoolBag<T>(bag, t, lane, kLanes);
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
  if (a.prefetch_ids) {
    const uint64_t groups = (tasks + kGroupTasks<kLanes> - 1) / kGroupTasks<kLanes>;
    PrefetchingLookupKernel<kLanes, T>
        <<<Blocks(groups, kThreads / kLanes), kThreads, 0, stream>>>(a);
  } else {
    PooledLookupKernel<kLanes, T><<<Blocks(tasks, kThreads / kLanes), kThreads, 0, stream>>>(a);
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

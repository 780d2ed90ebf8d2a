// Device code of the fused lookup (kernels/lookup.cu): per row type, how a row decodes
// (Row<T>: one element, one 16-byte vector added into fp32 accumulators, int8 rows with
// their scale and bias), and how a lane group pools one bag (PoolBag: 16-byte vectors where
// the row allows, kUnroll rows in flight per lane before the first add, id order) and
// writes the pooled vector; with kHot (cache.placement: host) each row is looked up in
// the table's HBM hot-row cache first (kernels/hot_cache.h). CUDA device code: only .cu
// files include it.
#ifndef FUSERANK_KERNELS_LOOKUP_POOL_H_
#define FUSERANK_KERNELS_LOOKUP_POOL_H_

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/descriptors.h"
#include "kernels/hot_cache.h"
#include "kernels/int8_rows.h"
#include "kernels/saturate.h"

namespace fuserank::kernels::lookup_pool {

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

// Where row `row` of the bag is read: with kHot, from the HBM hot-row cache when it holds
// the row (one more to `hits`), else from the table (or the gathered rows). Without kHot
// this is the plain address and `hits` is never touched.
template <bool kHot>
__device__ __forceinline__ const unsigned char* RowOf(const Bag& bag, const HotCacheTable& hot,
                                                      int32_t row, uint32_t& hits) {
  if constexpr (kHot) {
    if (hot.d_index != nullptr) {
      const int32_t slot = HotCacheSlot(hot, row);
      if (slot >= 0) {
        ++hits;
        return hot.d_rows + static_cast<size_t>(slot) * bag.stride;
      }
    }
  }
  return bag.base + static_cast<size_t>(row) * bag.stride;
}

// Both pooling paths return the bag's ids read from the hot-row cache as counted by the
// lane that pools the row's first vector or element (lane 0); every other lane returns 0.
template <RowType T, bool kHot>
__device__ uint32_t PoolVectors(const Bag& bag, const HotCacheTable& hot, int dim, int units,
                                bool mean, int lane, int lanes) {
  using R = Row<T>;
  constexpr int kE = R::kPerVector;
  uint32_t counted = 0;
  for (int v = lane; v < units; v += lanes) {
    float acc[kE] = {};
    float wsum = 0.0f;
    uint32_t hits = 0;
    uint32_t j = bag.begin;
    for (; j + kUnroll <= bag.end; j += kUnroll) {
      int4 q[kUnroll];
      typename R::Params p[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const unsigned char* row = RowOf<kHot>(bag, hot, bag.rows[j + u], hits);
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
      const unsigned char* row = RowOf<kHot>(bag, hot, bag.rows[j], hits);
      const float w = bag.weights != nullptr ? bag.weights[j] : 1.0f;
      R::Add(__ldg(reinterpret_cast<const int4*>(row) + v), R::LoadParams(row, dim), w, acc);
      wsum += w;
    }
    StoreVector<kE>(bag.out, v, acc, wsum, mean);
    if (v == 0) counted = hits;
  }
  return counted;
}

template <RowType T, bool kHot>
__device__ uint32_t PoolElements(const Bag& bag, const HotCacheTable& hot, int dim, bool mean,
                                 int lane, int lanes) {
  using R = Row<T>;
  uint32_t counted = 0;
  for (int e = lane; e < dim; e += lanes) {
    float acc = 0.0f;
    float wsum = 0.0f;
    uint32_t hits = 0;
    uint32_t j = bag.begin;
    for (; j + kUnroll <= bag.end; j += kUnroll) {
      float x[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const unsigned char* row = RowOf<kHot>(bag, hot, bag.rows[j + u], hits);
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
      const unsigned char* row = RowOf<kHot>(bag, hot, bag.rows[j], hits);
      const float w = bag.weights != nullptr ? bag.weights[j] : 1.0f;
      acc = fmaf(w, R::Element(row, e, R::LoadParams(row, dim)), acc);
      wsum += w;
    }
    bag.out[e] = Finish(acc, wsum, mean);
    if (e == 0) counted = hits;
  }
  return counted;
}

// Pools one bag; with kHot, rows the table's hot-row cache `hot` holds are read from it.
template <RowType T, bool kHot>
__device__ uint32_t PoolBagFrom(const Bag& bag, const HotCacheTable& hot, const LookupTable& t,
                                int lane, int lanes) {
  if (t.vector) {
    return PoolVectors<T, kHot>(bag, hot, t.dim, t.dim * Row<T>::kElemBytes / 16, t.mean != 0, lane,
                                lanes);
  }
  return PoolElements<T, kHot>(bag, hot, t.dim, t.mean != 0, lane, lanes);
}

template <RowType T>
__device__ void PoolBag(const Bag& bag, const LookupTable& t, int lane, int lanes) {
  PoolBagFrom<T, false>(bag, HotCacheTable{}, t, lane, lanes);
}

}  // namespace fuserank::kernels::lookup_pool

#endif  // FUSERANK_KERNELS_LOOKUP_POOL_H_

#include "engine/cpu_lookup.h"

#include <cstddef>
#include <cstdint>

#include "engine/cpu_dtype.h"
#include "engine/cpu_simd.h"

namespace fuserank::engine {
namespace {

// Bags ahead whose rows are prefetched: enough to overlap a few DRAM misses.
constexpr int kPrefetchBags = 4;
constexpr int kMaxPrefetchLines = 4;

struct F32 {
  using Storage = float;
  static FUSERANK_INLINE float Load(const float* p, int j) { return p[j]; }
};
struct F16 {
  using Storage = uint16_t;
  static FUSERANK_INLINE float Load(const uint16_t* p, int j) { return HalfToFloat(p[j]); }
};
struct BF16 {
  using Storage = uint16_t;
  static FUSERANK_INLINE float Load(const uint16_t* p, int j) { return BFloat16ToFloat(p[j]); }
};

struct LookupArgs {
  const EmbeddingTable* table;
  const uint32_t* bag_begin;
  const int32_t* rows;
  const float* weights;
  int first_bag;
  int bag_stride;
  int num_bags;
  float* out;
  int out_stride;
};

FUSERANK_INLINE void PrefetchBag(const LookupArgs& args, int k) {
  const size_t b = static_cast<size_t>(args.first_bag) + static_cast<size_t>(k) * args.bag_stride;
  const int lines = static_cast<int>((args.table->row_bytes + 63) / 64);
  for (uint32_t i = args.bag_begin[b]; i < args.bag_begin[b + 1]; ++i) {
    const std::byte* row = args.table->data + static_cast<size_t>(args.rows[i]) *
                                                  args.table->row_bytes;
    for (int line = 0; line < lines && line < kMaxPrefetchLines; ++line) {
      __builtin_prefetch(row + line * 64);
    }
  }
}

template <typename D>
FUSERANK_INLINE void PoolBags(const LookupArgs& args) {
  const EmbeddingTable& table = *args.table;
  const int dim = table.dim;
  const bool mean = table.pooling == Pooling::kMean;
  for (int k = 0; k < args.num_bags; ++k) {
    if (k + kPrefetchBags < args.num_bags) PrefetchBag(args, k + kPrefetchBags);
    const size_t b = static_cast<size_t>(args.first_bag) + static_cast<size_t>(k) * args.bag_stride;
    float* __restrict__ out = args.out + static_cast<size_t>(k) * args.out_stride;
    for (int j = 0; j < dim; ++j) out[j] = 0.0f;
    float weight_sum = 0.0f;
    for (uint32_t i = args.bag_begin[b]; i < args.bag_begin[b + 1]; ++i) {
      const float w = args.weights[i];
      const auto* __restrict__ row = reinterpret_cast<const typename D::Storage*>(
          table.data + static_cast<size_t>(args.rows[i]) * table.row_bytes);
      for (int j = 0; j < dim; ++j) out[j] += w * D::Load(row, j);
      weight_sum += w;
    }
    if (mean) {
      if (weight_sum == 0.0f) {
        for (int j = 0; j < dim; ++j) out[j] = 0.0f;
      } else {
        for (int j = 0; j < dim; ++j) out[j] /= weight_sum;
      }
    }
  }
}

template <typename D>
void PoolBagsGeneric(const LookupArgs& args) {
  PoolBags<D>(args);
}

#if FUSERANK_HAVE_AVX2_PATH
template <typename D>
FUSERANK_TARGET_AVX2 void PoolBagsAvx2(const LookupArgs& args) {
  PoolBags<D>(args);
}
#endif

template <typename D>
void Dispatch(const LookupArgs& args) {
#if FUSERANK_HAVE_AVX2_PATH
  if (CpuHasAvx2Fma()) {
    PoolBagsAvx2<D>(args);
    return;
  }
#endif
  PoolBagsGeneric<D>(args);
}

}  // namespace

void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride) {
  if (num_bags <= 0) return;
  const LookupArgs args{&table, bag_begin, rows,     weights,   first_bag,
                        bag_stride, num_bags, out, out_stride};
  switch (table.dtype) {
    case DType::kF32: Dispatch<F32>(args); break;
    case DType::kF16: Dispatch<F16>(args); break;
    case DType::kBF16: Dispatch<BF16>(args); break;
    case DType::kInt8: break;  // REQUIRES excludes it; the backend refuses such models
  }
}

}  // namespace fuserank::engine

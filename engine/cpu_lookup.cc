#include "engine/cpu_lookup.h"

#include <cstddef>
#include <cstdint>

#include "engine/cpu_dtype.h"
#include "engine/cpu_simd.h"

namespace fuserank::engine {
namespace {

// Bags ahead whose rows are prefetched: enough to overlap the DRAM misses of cold rows
// (4 and 16 measured alike on the bench model; 16 leaves room for slower memory).
constexpr int kPrefetchBags = 16;
constexpr int kMaxPrefetchLines = 4;

// Row access per table dtype: MakeRow(table, row) once per id, then Load(row, j).
template <typename T>
struct Plain {
  using Row = const T*;
  static FUSERANK_INLINE Row MakeRow(const EmbeddingTable& table, int32_t row) {
    return reinterpret_cast<const T*>(table.data + static_cast<size_t>(row) * table.row_bytes);
  }
};
struct F32 : Plain<float> {
  static FUSERANK_INLINE float Load(Row row, int j) { return row[j]; }
};
struct F16 : Plain<uint16_t> {
  static FUSERANK_INLINE float Load(Row row, int j) { return HalfToFloat(row[j]); }
};
struct BF16 : Plain<uint16_t> {
  static FUSERANK_INLINE float Load(Row row, int j) { return BFloat16ToFloat(row[j]); }
};
// Row-wise quantized: value = scale * q + bias with (scale, bias) = qparams[2 * row ..].
struct I8 {
  struct Row {
    const int8_t* q;
    float scale;
    float bias;
  };
  static FUSERANK_INLINE Row MakeRow(const EmbeddingTable& table, int32_t row) {
    return {
        reinterpret_cast<const int8_t*>(table.data + static_cast<size_t>(row) * table.row_bytes),
        table.qparams[2 * static_cast<size_t>(row)],
        table.qparams[2 * static_cast<size_t>(row) + 1]};
  }
  static FUSERANK_INLINE float Load(const Row& row, int j) {
    return row.scale * static_cast<float>(row.q[j]) + row.bias;
  }
};

struct Csr {
  const uint32_t* bag_begin;
  const int32_t* rows;
  const float* weights;
};

FUSERANK_INLINE void PrefetchBag(const EmbeddingTable& table, const Csr& csr, size_t b) {
  const int lines = static_cast<int>((table.row_bytes + 63) / 64);
  for (uint32_t i = csr.bag_begin[b]; i < csr.bag_begin[b + 1]; ++i) {
    const std::byte* row = table.data + static_cast<size_t>(csr.rows[i]) * table.row_bytes;
    for (int line = 0; line < lines && line < kMaxPrefetchLines; ++line) {
      __builtin_prefetch(row + line * 64);
    }
    if (table.qparams != nullptr) __builtin_prefetch(table.qparams + 2 * csr.rows[i]);
  }
}

// SPEC section 2, step 2 for one bag: the only place the pooling rule is written.
template <typename D>
FUSERANK_INLINE void PoolBag(const EmbeddingTable& table, const Csr& csr, size_t b,
                             float* __restrict__ out) {
  const int dim = table.dim;
  for (int j = 0; j < dim; ++j) out[j] = 0.0f;
  float weight_sum = 0.0f;
  for (uint32_t i = csr.bag_begin[b]; i < csr.bag_begin[b + 1]; ++i) {
    const float w = csr.weights[i];
    const typename D::Row row = D::MakeRow(table, csr.rows[i]);
    for (int j = 0; j < dim; ++j) out[j] += w * D::Load(row, j);
    weight_sum += w;
  }
  if (table.pooling == Pooling::kMean) {
    if (weight_sum == 0.0f) {
      for (int j = 0; j < dim; ++j) out[j] = 0.0f;
    } else {
      for (int j = 0; j < dim; ++j) out[j] /= weight_sum;
    }
  }
}

struct TableArgs {
  const EmbeddingTable* table;
  Csr csr;
  int first_bag;
  int bag_stride;
  int num_bags;
  float* out;
  int out_stride;
};

template <typename D>
FUSERANK_INLINE void PoolTable(const TableArgs& args) {
  auto bag = [&](int k) {
    return static_cast<size_t>(args.first_bag) + static_cast<size_t>(k) * args.bag_stride;
  };
  for (int k = 0; k < args.num_bags; ++k) {
    if (k + kPrefetchBags < args.num_bags) {
      PrefetchBag(*args.table, args.csr, bag(k + kPrefetchBags));
    }
    PoolBag<D>(*args.table, args.csr, bag(k), args.out + static_cast<size_t>(k) * args.out_stride);
  }
}

// The loop compiled for the baseline ISA and for AVX2+FMA, chosen at run time.
template <typename D>
void PoolTableGeneric(const TableArgs& args) {
  PoolTable<D>(args);
}

#if FUSERANK_HAVE_AVX2_PATH
template <typename D>
FUSERANK_TARGET_AVX2 void PoolTableAvx2(const TableArgs& args) {
  PoolTable<D>(args);
}
#endif

template <typename D>
void PoolTableDispatch(const TableArgs& args) {
#if FUSERANK_HAVE_AVX2_PATH
  if (CpuHasAvx2Fma()) {
    PoolTableAvx2<D>(args);
    return;
  }
#endif
  PoolTableGeneric<D>(args);
}

}  // namespace

void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride) {
  if (num_bags <= 0) return;
  const TableArgs args{&table,    {bag_begin, rows, weights}, first_bag, bag_stride, num_bags, out,
                       out_stride};
  switch (table.dtype) {
    case DType::kF32:
      PoolTableDispatch<F32>(args);
      break;
    case DType::kF16:
      PoolTableDispatch<F16>(args);
      break;
    case DType::kBF16:
      PoolTableDispatch<BF16>(args);
      break;
    case DType::kInt8:
      PoolTableDispatch<I8>(args);
      break;
  }
}

}  // namespace fuserank::engine

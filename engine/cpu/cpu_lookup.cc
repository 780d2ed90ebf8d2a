#include "engine/cpu/cpu_lookup.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/cpu/cpu_dtype.h"
#include "engine/cpu/cpu_simd.h"

#if FUSERANK_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

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
// fp16 on the AVX2 path: a plain _Float16 -> float conversion, which GCC compiles to F16C
// instructions inside the AVX2 (+F16C) functions and vectorises; exact, as HalfToFloat,
// whose branches would stop the vectoriser. (No _Float16, e.g. clang 14: HalfToFloat.)
#if FUSERANK_HAVE_AVX2_PATH && defined(__FLT16_MAX__)
#define FUSERANK_HAVE_F16_HW 1
struct F16Hw : Plain<uint16_t> {
  static FUSERANK_INLINE float Load(Row row, int j) {
    return static_cast<float>(std::bit_cast<_Float16>(row[j]));
  }
  // out[j] += w * row[j] for j < dim, 8 values per step (one vcvtph2ps each). Not forced
  // inline: it carries its own target, and GCC inlines it into the AVX2 loop that calls it.
  static FUSERANK_TARGET_AVX2 void Accumulate(Row row, float w, int dim, float* __restrict__ out) {
    const __m256 weight = _mm256_set1_ps(w);
    int j = 0;
    for (; j + 8 <= dim; j += 8) {
      const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j)));
      _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_loadu_ps(out + j), _mm256_mul_ps(weight, v)));
    }
    for (; j < dim; ++j) out[j] += w * Load(row, j);
  }
};
#endif
// The row access the AVX2 path uses for D.
template <typename D>
struct Avx2Access {
  using type = D;
};
#ifdef FUSERANK_HAVE_F16_HW
template <>
struct Avx2Access<F16> {
  using type = F16Hw;
};
#endif
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

struct TableArgs {
  const EmbeddingTable* table;
  Csr csr;
  int first_bag;
  int bag_stride;
  int num_bags;
  float* out;
  int out_stride;
  const HotLookup* hot;  // null: no hot tier (the kHot = false instantiations)
};

// Where id i's row is read: the hot set's compact copy when the row is in it (kHot), else
// the table. Returns true on a hit.
template <typename D, bool kHot>
FUSERANK_INLINE bool RowOf(const TableArgs& args, int32_t row, typename D::Row* out) {
  if constexpr (kHot) {
    const HotSet& set = *args.hot->set;
    const int32_t slot = set.FindSlot(row);
    if (slot >= 0) {
      *out = D::MakeRow(set.compact_table(), slot);
      return true;
    }
  }
  *out = D::MakeRow(*args.table, row);
  return false;
}

// Address of the first byte (and of the qparams) id i will read, for prefetching.
template <bool kHot>
FUSERANK_INLINE void PrefetchRow(const TableArgs& args, int32_t row) {
  const EmbeddingTable* source = args.table;
  if constexpr (kHot) {
    const HotSet& set = *args.hot->set;
    const int32_t slot = set.FindSlot(row);
    if (slot >= 0) {
      source = &set.compact_table();
      row = slot;
    }
  }
  const std::byte* bytes = source->data + static_cast<size_t>(row) * source->row_bytes;
  const int lines = static_cast<int>((source->row_bytes + 63) / 64);
  for (int line = 0; line < lines && line < kMaxPrefetchLines; ++line) {
    __builtin_prefetch(bytes + line * 64);
  }
  if (source->qparams != nullptr) __builtin_prefetch(source->qparams + 2 * row);
}

template <bool kHot>
FUSERANK_INLINE void PrefetchBag(const TableArgs& args, size_t b) {
  for (uint32_t i = args.csr.bag_begin[b]; i < args.csr.bag_begin[b + 1]; ++i) {
    PrefetchRow<kHot>(args, args.csr.rows[i]);
  }
}

// SPEC section 2, step 2 for one bag: the only place the pooling rule is written.
// Returns the number of ids read from the hot set.
template <typename D, bool kHot>
FUSERANK_INLINE uint32_t PoolBag(const TableArgs& args, size_t b, float* __restrict__ out) {
  const EmbeddingTable& table = *args.table;
  const Csr& csr = args.csr;
  const int dim = table.dim;
  for (int j = 0; j < dim; ++j) out[j] = 0.0f;
  // In double: SPEC's "zero when the sum of the weights is 0" is about the sum itself,
  // which a float running sum misses ({1, 2^-24, -1, -2^-24} adds up to -2^-24 in float,
  // and the mean became the pooled vector divided by that leftover).
  double weight_sum = 0.0;
  uint32_t hits = 0;
  for (uint32_t i = csr.bag_begin[b]; i < csr.bag_begin[b + 1]; ++i) {
    const float w = csr.weights[i];
    typename D::Row row;
    hits += RowOf<D, kHot>(args, csr.rows[i], &row) ? 1 : 0;
    if constexpr (requires { D::Accumulate(row, w, dim, out); }) {
      D::Accumulate(row, w, dim, out);
    } else {
      for (int j = 0; j < dim; ++j) out[j] += w * D::Load(row, j);
    }
    weight_sum += w;
  }
  if (table.pooling == Pooling::kMean) {
    if (weight_sum == 0.0) {
      for (int j = 0; j < dim; ++j) out[j] = 0.0f;
    } else {
      // Clamped to float's range before the cast (a quotient past it is undefined as a
      // float; SaturateNonFinite would make an infinity +-FLT_MAX after pooling anyway).
      constexpr double kMax = std::numeric_limits<float>::max();
      for (int j = 0; j < dim; ++j) {
        out[j] = static_cast<float>(std::clamp(out[j] / weight_sum, -kMax, kMax));
      }
    }
  }
  return hits;
}

template <typename D, bool kHot>
FUSERANK_INLINE void PoolTable(const TableArgs& args) {
  auto bag = [&](int k) {
    return static_cast<size_t>(args.first_bag) + static_cast<size_t>(k) * args.bag_stride;
  };
  uint64_t hits = 0;
  uint64_t ids = 0;
  for (int k = 0; k < args.num_bags; ++k) {
    if (k + kPrefetchBags < args.num_bags) PrefetchBag<kHot>(args, bag(k + kPrefetchBags));
    const size_t b = bag(k);
    hits += PoolBag<D, kHot>(args, b, args.out + static_cast<size_t>(k) * args.out_stride);
    if constexpr (kHot) {
      const uint32_t begin = args.csr.bag_begin[b];
      const uint32_t size = args.csr.bag_begin[b + 1] - begin;
      ids += size;
      if (args.hot->sampler != nullptr) {
        args.hot->sampler->ObserveRows(args.hot->table_index,
                                       absl::MakeConstSpan(args.csr.rows + begin, size));
      }
    }
  }
  if constexpr (kHot) {
    *args.hot->hits += hits;
    *args.hot->misses += ids - hits;
  }
}

// The loop compiled for the baseline ISA and for AVX2+FMA, chosen at run time.
template <typename D, bool kHot>
void PoolTableGeneric(const TableArgs& args) {
  PoolTable<D, kHot>(args);
}

#if FUSERANK_HAVE_AVX2_PATH
template <typename D, bool kHot>
FUSERANK_TARGET_AVX2 void PoolTableAvx2(const TableArgs& args) {
  PoolTable<D, kHot>(args);
}
#endif

template <typename D, bool kHot>
void PoolTableDispatch(const TableArgs& args) {
#if FUSERANK_HAVE_AVX2_PATH
  if (CpuHasAvx2Fma()) {
    PoolTableAvx2<typename Avx2Access<D>::type, kHot>(args);
    return;
  }
#endif
  PoolTableGeneric<D, kHot>(args);
}

// Ids in the bags of `args`.
uint64_t CountIds(const TableArgs& args) {
  uint64_t ids = 0;
  for (int k = 0; k < args.num_bags; ++k) {
    const size_t b = static_cast<size_t>(args.first_bag) + static_cast<size_t>(k) * args.bag_stride;
    ids += args.csr.bag_begin[b + 1] - args.csr.bag_begin[b];
  }
  return ids;
}

template <typename D>
void PoolTableFor(const TableArgs& args) {
  if (args.hot == nullptr) {
    PoolTableDispatch<D, false>(args);
  } else if (args.hot->set->size() == 0 && args.hot->sampler == nullptr) {
    // Nothing to probe or sample: every id is a miss.
    PoolTableDispatch<D, false>(args);
    *args.hot->misses += CountIds(args);
  } else {
    PoolTableDispatch<D, true>(args);
  }
}

}  // namespace

void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride, const HotLookup* hot) {
  if (num_bags <= 0) return;
  const TableArgs args{
      &table, {bag_begin, rows, weights}, first_bag, bag_stride, num_bags, out, out_stride, hot};
  switch (table.dtype) {
    case DType::kF32:
      PoolTableFor<F32>(args);
      break;
    case DType::kF16:
      PoolTableFor<F16>(args);
      break;
    case DType::kBF16:
      PoolTableFor<BF16>(args);
      break;
    case DType::kInt8:
      PoolTableFor<I8>(args);
      break;
  }
}

void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride) {
  PooledLookup(table, bag_begin, rows, weights, first_bag, bag_stride, num_bags, out, out_stride,
               nullptr);
}

}  // namespace fuserank::engine

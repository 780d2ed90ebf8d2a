// The CPU engine's pooled embedding lookup (SPEC section 2, step 2): many bags of one
// table, each reduced to one float vector. It is also the reference the CUDA lookup
// kernel is tested against. Stateless; thread-safe on distinct outputs.
#ifndef FUSERANK_ENGINE_CPU_CPU_LOOKUP_H_
#define FUSERANK_ENGINE_CPU_CPU_LOOKUP_H_

#include <cstdint>

#include "engine/batch.h"
#include "engine/hot_rows/access_sampler.h"
#include "engine/hot_rows/hot_rows.h"
#include "engine/model.h"

namespace fuserank::engine {

// The hot-row tier of one table's lookup (cache.*). Rows found in `set` are read from its
// compact copy, which holds the same bytes as the table, so the pooled vectors (and every
// score) are bit-identical to a lookup without it. Every id counts as a hit (found in the
// set) or a miss, added to *hits / *misses; `sampler`, when set, sees every id (cache.policy:
// frequency) under table index `table_index`.
struct HotLookup {
  const HotSet* set = nullptr;  // REQUIRED: the table's set (HotSet::Empty for none)
  AccessSampler* sampler = nullptr;
  int table_index = 0;  // spec order, as in HotRowManager
  uint64_t* hits = nullptr;
  uint64_t* misses = nullptr;
};

// Pools `num_bags` bags of `table`. Bag k (0 <= k < num_bags) is CSR bag
// b = first_bag + k * bag_stride: rows[bag_begin[b] .. bag_begin[b + 1]) with one weight
// each in `weights`. Writes table.dim floats to out + k * out_stride:
//   sum:  sum_i w_i * E[row_i]
//   mean: that sum / sum_i w_i, or zeros when sum_i w_i == 0
// and zeros for an empty bag. fp16 / bf16 rows are converted exactly (cpu_dtype.h); int8
// rows are scale * q + bias with the row's (scale, bias) from table.qparams;
// accumulation is float32 in id order, the sum of the weights double (so that a sum that
// is 0 reads as 0).
// REQUIRES: every row in [0, table.rows); int8 tables have qparams.
void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride);

// The same reading hot rows through `hot` (see HotLookup); `hot` null: as above.
// REQUIRES: hot->set is a set of `table` (HotSet::table_index() == hot->table_index).
void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride, const HotLookup* hot);

// The same over a BagSet (Batch::user or Batch::item).
inline void PooledLookup(const EmbeddingTable& table, const BagSet& bags, int first_bag,
                         int bag_stride, int num_bags, float* out, int out_stride,
                         const HotLookup* hot = nullptr) {
  PooledLookup(table, bags.bag_begin.data(), bags.rows.data(), bags.weights.data(), first_bag,
               bag_stride, num_bags, out, out_stride, hot);
}

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_LOOKUP_H_

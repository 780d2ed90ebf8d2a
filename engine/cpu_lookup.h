// The CPU engine's pooled embedding lookup (SPEC section 2, step 2): many bags of one
// table, each reduced to one float vector. It is also the reference the CUDA lookup
// kernel is tested against. Stateless; thread-safe on distinct outputs.
#ifndef FUSERANK_ENGINE_CPU_LOOKUP_H_
#define FUSERANK_ENGINE_CPU_LOOKUP_H_

#include <cstdint>

#include "engine/batch.h"
#include "engine/model.h"

namespace fuserank::engine {

// Pools `num_bags` bags of `table`. Bag k (0 <= k < num_bags) is CSR bag
// b = first_bag + k * bag_stride: rows[bag_begin[b] .. bag_begin[b + 1]) with one weight
// each in `weights`. Writes table.dim floats to out + k * out_stride:
//   sum:  sum_i w_i * E[row_i]
//   mean: that sum / sum_i w_i, or zeros when sum_i w_i == 0
// and zeros for an empty bag. fp16 / bf16 rows are converted exactly (cpu_dtype.h); int8
// rows are scale * q + bias with the row's (scale, bias) from table.qparams;
// accumulation is float32 in id order.
// REQUIRES: every row in [0, table.rows); int8 tables have qparams.
void PooledLookup(const EmbeddingTable& table, const uint32_t* bag_begin, const int32_t* rows,
                  const float* weights, int first_bag, int bag_stride, int num_bags, float* out,
                  int out_stride);

// The same over a BagSet (Batch::user or Batch::item).
inline void PooledLookup(const EmbeddingTable& table, const BagSet& bags, int first_bag,
                         int bag_stride, int num_bags, float* out, int out_stride) {
  PooledLookup(table, bags.bag_begin.data(), bags.rows.data(), bags.weights.data(), first_bag,
               bag_stride, num_bags, out, out_stride);
}

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_LOOKUP_H_

// The batches the GPU benches time: one request of n candidates on a model, one id per bag,
// each bag's row drawn by the caller's law (uniform, Zipf), dense values uniform in
// [-1, 1], top 100 (or all). Not thread-safe (the caller's generator).
#ifndef FUSERANK_BENCH_GPU_BENCH_BATCHES_H_
#define FUSERANK_BENCH_GPU_BENCH_BATCHES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>

#include "engine/batch.h"
#include "engine/model.h"

namespace fuserank::bench {

// row(t, rng): the row of a bag of table index t (spec order).
using RowLaw = std::function<int32_t(int table, std::mt19937_64& rng)>;

engine::Batch OneRequestBatch(const std::shared_ptr<const engine::Model>& model, uint32_t n,
                              std::mt19937_64& rng, const RowLaw& row);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_BENCH_BATCHES_H_

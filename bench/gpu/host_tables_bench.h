// cache.placement: host on the GPU: the bench model's per-batch device time with its tables
// in mapped host memory, without hot rows (every row over the bus) and with each table's
// 4096 hottest rows in the device cache under Zipf traffic, beside the same model with its
// tables in device memory; the hit rate the device counted. Prints a readable line and a
// JSON line ("host_tables") per figure.
#ifndef FUSERANK_BENCH_GPU_HOST_TABLES_BENCH_H_
#define FUSERANK_BENCH_GPU_HOST_TABLES_BENCH_H_

#include <memory>

#include "engine/model.h"

namespace fuserank::bench {

// `reps` timed batches per point after a warm-up of 20.
void RunHostTableBenches(std::shared_ptr<const engine::Model> model, int reps);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_HOST_TABLES_BENCH_H_

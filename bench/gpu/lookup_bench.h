// Fused-lookup bandwidth: 18 tables of 200k rows (fp32 dim 32: 460 MB, far past the L2),
// one-hot and 8-id bags, uniform and Zipf ids, with and without the id-reorder pass;
// fp32 dim 128, fp16 and int8 rows too; timed kernel-only with a flushed L2 and compared
// with the device-to-device copy.
#ifndef FUSERANK_BENCH_GPU_LOOKUP_BENCH_H_
#define FUSERANK_BENCH_GPU_LOOKUP_BENCH_H_

#include "bench/gpu/bench_timer.h"

namespace fuserank::bench {

// `copy_gbps`: the device-to-device copy bandwidth measured in the same run.
void RunLookupBenches(DeviceTimer& timer, double copy_gbps);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_LOOKUP_BENCH_H_

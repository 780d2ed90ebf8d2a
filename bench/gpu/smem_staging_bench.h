// The shared-memory staging experiment (kernels/smem_staging.h), measured against the
// plain lookup, which leaves hot rows to the L2: the lookup benches' 18 tables of 200k fp32
// rows of dim 32, one-hot bags of Zipf 1.05 and 1.2 ids (hot rows scattered over each
// table), 256, 1,024 and 8,192 candidates (the server's largest batch); the 16 and 64
// hottest rows of every table staged, with the product's grid (a lane group per bag), with
// as many blocks as the SMs hold at once, and with one block per SM (each staging then
// serves more bags). A pool of 8 distinct batches cycled with the L2 kept warm, so hot rows
// stay in it and the others mostly do not. Every variant's pooled output is compared bit
// for bit with the plain lookup's, on the timed batches and on one of weighted bags of 0-9
// ids over sum- and mean-pooled tables ("smem_staging_check").
// Prints a readable line and a JSON line ("smem_staging") per figure.
#ifndef FUSERANK_BENCH_GPU_SMEM_STAGING_BENCH_H_
#define FUSERANK_BENCH_GPU_SMEM_STAGING_BENCH_H_

#include "bench/gpu/bench_timer.h"

namespace fuserank::bench {

// `sms`: the device's multiprocessors.
void RunSmemStagingBenches(DeviceTimer& timer, int sms);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_SMEM_STAGING_BENCH_H_

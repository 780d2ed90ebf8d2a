// The CUDA backend's warm-up batches (Backend::WarmupBatches): one batch for every
// (candidate bucket, top-K shape) a real batch can reach, so that the graph of each is
// captured before traffic. Warm-up bags hold one id each, so they capture the id-prefetch
// variant one-id batches take; a bucket whose traffic takes the other one (PrefetchIds in
// cuda_worker.h: longer bags) captures it on its first such batch, on the request path. The
// first batch is the one with the most requests in the largest bucket, so the staging
// buffer grows once, before any graph is captured (a later grow re-points the graphs);
// then bucket by bucket, largest first. Plain function (no CUDA), shared with the CPU tests.
#ifndef FUSERANK_ENGINE_CUDA_WARMUP_BATCHES_H_
#define FUSERANK_ENGINE_CUDA_WARMUP_BATCHES_H_

#include <vector>

namespace fuserank::engine {

// Each batch as its requests' candidate counts: the batch's candidates fill its bucket (at
// most max_batch_candidates), its longest request falls in the top-K shape it warms, no
// request exceeds max_request_candidates. REQUIRES: both bounds >= 1.
std::vector<std::vector<int>> CudaWarmupBatches(int max_batch_candidates,
                                                int max_request_candidates);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CUDA_WARMUP_BATCHES_H_

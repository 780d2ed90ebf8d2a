// Warms a freshly loaded model version up before it serves: touches every page of its
// embedding tables (resident already in the private copy a load reads; cheap insurance for
// tables copied elsewhere) and runs synthetic batches through every backend worker
// (buffers grown, CUDA graphs captured), checking that the scores come out finite. Call before the
// version's Batcher starts: it calls Backend::Run directly. Not thread-safe (one caller).
#ifndef FUSERANK_SERVER_MODEL_WARMUP_H_
#define FUSERANK_SERVER_MODEL_WARMUP_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/model.h"

namespace fuserank::server {

// A batch of one request per entry of `requests`, with that many candidates (each its own
// top_k: all), every table's bag holding one row and every dense value 0.5. Exposed for
// tests.
engine::Batch SyntheticBatch(const std::shared_ptr<const engine::Model>& model,
                             const std::vector<int>& requests);
// One request of `candidates` candidates.
inline engine::Batch SyntheticBatch(const std::shared_ptr<const engine::Model>& model,
                                    int candidates) {
  return SyntheticBatch(model, std::vector<int>{candidates});
}

// Reads one byte of every page of the tables (and their int8 qparams); returns a checksum
// only so that the reads cannot be optimised away.
uint64_t TouchTablePages(const engine::Model& model);

// Runs a SyntheticBatch of each of the backend's WarmupBatches() on every worker, in that
// order (the CUDA backend: every candidate bucket and top-K shape a batch can reach, the
// largest first; the CPU backend: one small and one of 256). `max_batch_candidates` is the
// backend's (the larger of engine.max_batch_candidates and server.max_candidates),
// `max_request_candidates` server.max_candidates.
// Then flushes the backend's lookup counts (Backend::FlushLookupCounts).
// FAILED_PRECONDITION when a run fails, returns the wrong number of items, or a score is
// not in [0, 1].
absl::Status WarmUpBackend(const std::shared_ptr<const engine::Model>& model,
                           engine::Backend* backend, int max_batch_candidates,
                           int max_request_candidates);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_WARMUP_H_

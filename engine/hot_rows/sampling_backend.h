// cache.policy: frequency for a backend that does not sample row accesses itself (the
// CUDA backend, whose lookups run on the device): after each batch it scored, the batch's
// rows are sampled on the calling worker thread into the model's HotRowManager sketches,
// one AccessSampler per worker, about one access in sample_period (a jump from sample to
// sample per bag, as the CPU engine samples while it pools). Everything else is the inner
// backend's. Thread-safe in the Backend sense (one Run per worker at a time).
#ifndef FUSERANK_ENGINE_HOT_ROWS_SAMPLING_BACKEND_H_
#define FUSERANK_ENGINE_HOT_ROWS_SAMPLING_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/hot_rows/access_sampler.h"
#include "engine/hot_rows/hot_row_manager.h"

namespace fuserank::engine {

class SamplingBackend final : public Backend {
 public:
  // REQUIRES: `manager` has sketches (HotRowOptions::sketches) and outlives this backend.
  SamplingBackend(std::unique_ptr<Backend> inner, HotRowManager* manager);

  std::string device() const override { return inner_->device(); }
  int num_workers() const override { return inner_->num_workers(); }
  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override;
  absl::Status health() const override { return inner_->health(); }
  void FlushLookupCounts() override { inner_->FlushLookupCounts(); }
  std::vector<std::vector<int>> WarmupBatches(int max_batch_candidates,
                                              int max_request_candidates) const override {
    return inner_->WarmupBatches(max_batch_candidates, max_request_candidates);
  }

 private:
  // Samples every row `batch` reads with `worker`'s sampler and flushes it.
  void Observe(int worker, const Batch& batch);

  const std::unique_ptr<Backend> inner_;
  std::vector<std::unique_ptr<AccessSampler>> samplers_;  // per worker
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_SAMPLING_BACKEND_H_

// The CUDA backend: a model's tables and weights resident on one GPU and a pool of
// workers (engine.streams), each running whole batches on its own stream, replayed as
// one CUDA graph per size bucket. Built into the run-time loaded module
// libfuserank_cuda.so; the server reaches it only through the Backend interface.
// Thread-safe in the Backend sense: one Run() per worker index at a time.
#ifndef FUSERANK_ENGINE_CUDA_CUDA_BACKEND_H_
#define FUSERANK_ENGINE_CUDA_CUDA_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/cuda/device_hot_cache.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/mlp_plan.h"
#include "engine/cuda/warmup_batches.h"
#include "engine/model.h"

namespace fuserank::engine::cuda {

// Settings of the CUDA backend that the engine config does not carry.
struct CudaOptions {
  // Sort and deduplicate (table, row) per batch and read each row once (off by default;
  // a measurement decides). The module reads FUSERANK_CUDA_REORDER_IDS=1.
  bool reorder_ids = false;
  // Event record nodes between a graph's stages, so replayed batches report their stage
  // times (on by default; the GPU bench turns it off to measure what the nodes cost).
  bool graph_stage_events = true;
  // With graph_stage_events: one batch in this many per worker replays the key's graph
  // with the event nodes and reports its stages; the others replay the same pass without
  // them (StageTimes::timed false). 1: every batch (one graph per key); 0: none. Eager
  // batches always report their stages.
  int stage_sample_period = 16;
  // The fewest ids a batch of fp32 rows in bags of about one id needs for its lookup to
  // read ids ahead (kernels::LookupArgs::prefetch_ids; PrefetchIds in cuda_worker.h).
  uint64_t prefetch_min_ids = kPrefetchMinIds;
  size_t workspace_bytes = size_t{8} << 20;  // cuBLASLt workspace per worker
  // Time the cuBLASLt heuristic's proposals per (MLP layer, size bucket) at creation and
  // keep the fastest (MlpPlan); off: its first that runs. Two backends of one model may
  // then pick different algorithms, so their scores may differ in the last bits: tests
  // that compare two backends bit for bit turn it off.
  bool mlp_autotune = true;
  // BackendOptions::host_tables: how often a worker reads the device hot-row counters
  // back into the manager (zero: after every batch), and how often the cache's updater
  // looks for a swapped hot-row set when no batch has told it.
  absl::Duration hot_count_interval = absl::Seconds(1);
  absl::Duration hot_poll = absl::Milliseconds(100);
};

class CudaBackend final : public Backend {
 public:
  // Probes options.gpu, uploads the model and creates options.workers workers.
  // FAILED_PRECONDITION without a usable GPU; UNIMPLEMENTED for what the GPU path does
  // not serve (a dot interaction wider than the device's shared memory per block; host
  // tables with the id reorder or with more than kernels::kMaxHotCountedTables tables);
  // RESOURCE_EXHAUSTED when device (or page-locked host) memory runs out.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(std::shared_ptr<const Model> model,
                                                             const BackendOptions& options,
                                                             const CudaOptions& cuda_options);
  ~CudaBackend() override;

  std::string device() const override;
  int num_workers() const override { return static_cast<int>(workers_.size()); }
  // After a device fault (engine/device_fault.h) every call returns health() at once.
  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override;
  absl::Status health() const override;
  // Every worker's device hot-row counts not read back yet, to the manager.
  void FlushLookupCounts() override;
  // Every (candidate bucket, top-K shape) a batch can reach (engine/cuda/warmup_batches.h).
  std::vector<std::vector<int>> WarmupBatches(int max_batch_candidates,
                                              int max_request_candidates) const override {
    return CudaWarmupBatches(max_batch_candidates, max_request_candidates);
  }

  // Counters of one worker (read between batches of that worker).
  const WorkerStats& stats(int worker) const { return workers_[worker]->stats(); }
  // The probe's description of the GPU.
  const std::string& description() const { return description_; }
  // host_tables: the hot-row set version the device cache holds now (what the next batch
  // reads); 0 without host tables.
  uint64_t hot_cache_version() const { return hot_cache_ == nullptr ? 0 : hot_cache_->version(); }
  // The MLP plans in the order a batch runs them ("bottom", "dcn <l>", "top"), for the
  // benchmarks' report of the algorithms chosen.
  std::vector<std::pair<std::string, const MlpPlan*>> mlp_plans() const;

 private:
  CudaBackend() = default;
  // Marks the backend failed by `fault` (the first one wins); returns what Run answers.
  absl::Status Fail(const absl::Status& fault);

  std::shared_ptr<const Model> model_;
  std::string description_;
  std::unique_ptr<DeviceModel> device_model_;
  std::unique_ptr<MlpPlan> bottom_;
  std::unique_ptr<MlpPlan> top_;
  std::vector<std::unique_ptr<MlpPlan>> dcn_;
  std::unique_ptr<DeviceHotCache> hot_cache_;  // host_tables with a HotRowManager
  BackendShared shared_;
  std::atomic<bool> failed_{false};  // set once, after failure_
  mutable absl::Mutex failure_mu_;
  absl::Status failure_ ABSL_GUARDED_BY(failure_mu_);  // DeviceFailedStatus of the first fault
  // Last: workers (and their graphs) go before the model state they point into.
  std::vector<std::unique_ptr<CudaWorker>> workers_;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_CUDA_BACKEND_H_

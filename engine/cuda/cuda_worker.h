// One worker of the CUDA backend: its stream, pinned staging (one copy in, one copy out
// per batch), device activations sized for the largest size bucket, a cuBLASLt handle and
// workspace, and the CUDA graphs it captured, one per (size bucket, top-K shape).
// Not thread-safe: the backend runs at most one batch per worker at a time.
#ifndef FUSERANK_ENGINE_CUDA_CUDA_WORKER_H_
#define FUSERANK_ENGINE_CUDA_CUDA_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/cuda_handles.h"
#include "engine/cuda/dcn_stage.h"
#include "engine/cuda/device_hot_cache.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/cuda/graph_retry.h"
#include "engine/cuda/mlp_plan.h"
#include "engine/hot_rows/hot_row_manager.h"

namespace fuserank::engine::cuda {

// Whether the lookup of a batch reads its ids ahead (kernels::LookupArgs::prefetch_ids):
// for fp32 rows when the bags hold 1.25 ids or fewer on average and the batch has at
// least `min_ids` ids. As measured on an H200 (docs/gpu.md, "The lookup"): 1.4-1.5x
// faster at 295k and 1.2M one-id lookups of fp32 rows, 1.15x at 74k; slower on longer
// bags and on fp16 and int8 rows, and on the bench model's batches of 8k-27k ids (8x
// fewer lane groups put a small batch on fewer multiprocessors).
inline constexpr uint64_t kPrefetchMinIds = 65536;
bool PrefetchIds(kernels::RowType row_type, const kernels::PackedHeader& h, uint64_t min_ids);

// The backend's read-only state that every worker reads. Outlives the workers.
struct BackendShared {
  int gpu = 0;
  bool cuda_graphs = true;
  bool blocking_wait = true;  // engine.cuda_wait: block
  bool reorder_ids = false;
  bool graph_stage_events = true;               // CudaOptions::graph_stage_events
  int stage_sample_period = 16;                 // CudaOptions::stage_sample_period
  uint64_t prefetch_min_ids = kPrefetchMinIds;  // CudaOptions::prefetch_min_ids
  size_t dot_shared_bytes = 0;                  // the dot kernel's shared memory per block
  uint32_t max_bucket = 0;                      // CandidateBucket(max_batch_candidates)
  std::vector<uint32_t> buckets;                // kMinCandidateBucket, doubling, up to max_bucket
  size_t workspace_bytes = 0;
  GpuLayout layout;
  PackInfo pack_info;
  const DeviceModel* model = nullptr;
  const MlpPlan* bottom = nullptr;  // nullptr without a bottom MLP
  const MlpPlan* top = nullptr;
  std::vector<const MlpPlan*> dcn;  // dcn: one plan per cross layer (empty otherwise)
  // The model's hot-row counters, or null. With the tables in device memory there is no
  // hot-row tier: every lookup is recorded as a miss.
  HotRowManager* hot_rows = nullptr;
  // cache.placement: host (tables in mapped host memory): the HBM hot-row cache, whose
  // lookups the kernel counts on the device; a worker reads its counters at most once per
  // `hot_count_interval_ns` (0: after every batch) into hot_rows. Null otherwise.
  DeviceHotCache* hot_cache = nullptr;
  int64_t hot_count_interval_ns = 1'000'000'000;
};

struct WorkerStats {
  uint64_t batches = 0;
  uint64_t graph_launches = 0;
  uint64_t graphs_captured = 0;
  uint64_t graph_capture_failures = 0;  // also reported per batch in BatchResult
  uint64_t staging_grows = 0;
  uint64_t graphs_updated = 0;  // graphs re-pointed in place after a staging grow
  // Launch calls of the last batch: kernels and cuBLASLt matmuls, or 1 for a replayed
  // graph (the two copies and the timing events are not counted).
  int last_launches = 0;
  bool last_used_graph = false;
  double last_device_seconds = 0;  // from before the copy in to after the copy out
  std::string graph_error;         // why the last failed capture failed ("" if none did)
  // Why CUDA last refused to re-point a graph in place (the graph was then instantiated
  // anew): the error and cudaGraphExecUpdateResult; "" if it never refused.
  std::string graph_update_refusal;
};

class CudaWorker {
 public:
  // REQUIRES: the current device is shared->gpu.
  static absl::StatusOr<std::unique_ptr<CudaWorker>> Create(const BackendShared* shared);
  // With a device hot-row cache, adds the counts not read back yet to the manager.
  // REQUIRES: the current device is shared->gpu.
  ~CudaWorker();
  // With a device hot-row cache, reads the device counters back now and adds what they
  // gained to the manager (the warm-up's end, the destructor). REQUIRES: no Run() in
  // flight; the current device is shared->gpu.
  void FlushHotCounts();

  // Scores `batch` and writes every request's top-K into `result`.
  absl::Status Run(const Batch& batch, BatchResult* result);
  const WorkerStats& stats() const { return stats_; }

 private:
  // One captured graph per (size bucket, top-K shape, id prefetch), and when to capture it
  // again after a capture failed. `regrow`: a staging grow left `exec` pointing at the old
  // buffers (never launched so); the key's next batch captures the forward pass on the new
  // ones and re-points `exec` in place (cudaGraphExecUpdate: same nodes, new parameters),
  // or instantiates it anew where the update is refused, and replays it, instead of
  // running eagerly first.
  // `exec` replays the pass without stage events, `timed` with them (the sampled
  // batches'); a key holds the variants the settings use (want_plain_, want_timed_).
  struct GraphSlot {
    GraphExec exec;
    GraphExec timed;
    GraphRetry retry;
    bool regrow = false;
    uint64_t batches = 0;  // of this key: one in stage_sample_period replays `timed`
  };

  explicit CudaWorker(const BackendShared* shared);
  absl::Status Allocate();
  // Grows the staging and gather buffers for `h`, all or nothing: on failure the worker
  // keeps its old buffers (and graphs) and serves later batches that fit them.
  absl::Status EnsureStaging(const kernels::PackedHeader& h);
  // The graph slot of (bucket_index, shape) for the batch at hand (prefetch_ids_).
  GraphSlot& Slot(int bucket_index, int shape);
  // Enqueues the whole forward pass for `bucket_index` (graph capture or eager), with the
  // stage events 1..4 recorded between its stages: on the stream when eager, as event
  // record nodes of the graph when `in_graph` (capture) and `timed`, so that a replayed
  // batch's stages are timed as an eager one's are.
  absl::Status EnqueueForward(int bucket_index, int shape, bool in_graph, bool timed);
  absl::Status EnqueueLookup(uint32_t bucket);
  absl::Status EnqueueInteraction(uint32_t bucket);
  absl::Status EnqueueTopK(uint32_t bucket, int shape);
  // The copy in, the graph or the eager forward pass, the copies out, and the wait. On an
  // error it still waits for what it queued, so the next batch never rewrites the staging
  // buffers or drops a hot-row cache generation while the device reads them.
  absl::Status Execute(const kernels::PackedHeader& h, int bucket_index, int shape, bool replay);
  absl::Status ExecuteSteps(const kernels::PackedHeader& h, int bucket_index, int shape,
                            bool replay);
  // Captures every variant of the key (bucket_index, shape) the settings use.
  absl::Status Capture(int bucket_index, int shape);
  // One variant into *exec: re-pointed in place when `update` (*exec holds the same pass on
  // older buffers) and the runtime takes it (*updated true), else instantiated anew.
  absl::Status CaptureVariant(int bucket_index, int shape, bool timed, bool update, GraphExec* exec,
                              bool* updated);
  // Whether the key's graph variants are all there.
  bool Ready(const GraphSlot& slot) const {
    return (!want_plain_ || slot.exec) && (!want_timed_ || slot.timed);
  }
  // After an eager batch: captures its key's graph when the retry policy says so; a failed
  // capture is counted in `result` and logged (once per key at warning level).
  void MaybeCapture(int bucket_index, int shape, BatchResult* result);
  // Before a batch whose key lost its graph to a staging grow: captures it again; true
  // when the batch can replay it. A failure is handled as MaybeCapture's.
  bool RecaptureAfterGrow(int bucket_index, int shape, BatchResult* result);
  void CaptureFailed(GraphSlot& slot, int bucket_index, int shape, const absl::Status& why,
                     BatchResult* result);
  void RankLongRequestsOnHost(const Batch& batch, BatchResult* result);
  // Adds the batch's lookups to the hot-row counters: with a device hot-row cache the
  // device counts read back by this batch (when due), else every lookup as a miss.
  void RecordLookups();
  // cache.placement: host: this worker's descriptors and device counters (none otherwise).
  absl::Status AllocateHotCache();
  // cache.placement: host: before a batch, this worker's descriptors point at the current
  // generation of the device hot-row cache (a copy on the stream when it changed), and
  // read_hot_counts_ says whether the batch reads the device counters back.
  absl::Status RefreshHotCache();
  // The batch's device time and, when `staged` (eager, or a graph with stage events), its
  // stages from the six events; else the stages are left untimed (StageTimes::timed).
  void FillStageTimes(bool staged, BatchResult* result);

  const BackendShared* shared_;
  BatchPacker packer_;
  Stream stream_;
  LtHandle lt_;
  static constexpr int kEvents = 6;
  Event events_[kEvents];
  DeviceBuffer workspace_;
  PinnedBuffer h_stage_;
  DeviceBuffer d_stage_;
  DeviceBuffer d_gathered_;
  PinnedBuffer h_out_;
  DeviceBuffer d_out_;
  PinnedBuffer h_logits_;
  DeviceBuffer x_, h_, user_, item_, hidden0_, hidden1_, logits_;
  std::vector<LayerIo> bottom_io_;
  std::vector<LayerIo> top_io_;
  std::unique_ptr<DcnStage> dcn_;  // interaction dcn only
  // [(bucket_index * kNumTopKShapes + shape) * 2 + prefetch_ids_]
  std::vector<GraphSlot> graphs_;
  // The batch at hand has the lookup read its ids ahead (PrefetchIds); its graphs are
  // apart from the other setting's.
  bool prefetch_ids_ = false;
  // The graph variants this worker keeps per key (from graph_stage_events and
  // stage_sample_period), and whether the batch at hand replays the timed one.
  bool want_plain_ = true;
  bool want_timed_ = true;
  bool timed_ = false;
  int launches_ = 0;
  std::vector<float> scratch_score_;  // host top-K of requests over kMaxTopKSegment
  // cache.placement: host: the generation this worker reads, its descriptors on the device
  // (the lookup and its graphs read them there), the device counters (two per lookup
  // table, cumulative), their last copy read back and when.
  std::shared_ptr<const HotCacheGeneration> hot_gen_;
  DeviceBuffer d_hot_;
  DeviceBuffer d_hot_counts_;
  PinnedBuffer h_hot_counts_;
  std::vector<uint64_t> hot_counts_seen_;
  int64_t hot_counts_read_ns_ = 0;
  bool read_hot_counts_ = false;
  WorkerStats stats_;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_CUDA_WORKER_H_

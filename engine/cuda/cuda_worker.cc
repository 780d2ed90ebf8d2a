#include "engine/cuda/cuda_worker.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/status_macros.h"
#include "kernels/batch_layout.h"
#include "kernels/interaction.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"
#include "kernels/topk.h"
#include "kernels/topk_keys.h"

namespace fuserank::engine::cuda {
namespace {

static_assert(sizeof(kernels::ScoredPair) == sizeof(ScoredIndex) &&
                  offsetof(ScoredIndex, index) == 0 && offsetof(ScoredIndex, score) == 4,
              "results copy back as ScoredIndex");

constexpr size_t kInitialStagingBytes = 256 * 1024;

size_t Floats(uint32_t rows, int ld) { return sizeof(float) * rows * static_cast<size_t>(ld); }

}  // namespace

CudaWorker::CudaWorker(const BackendShared* shared)
    : shared_(shared),
      packer_(shared->pack_info, shared->reorder_ids),
      want_plain_(!(shared->graph_stage_events && shared->stage_sample_period == 1)),
      want_timed_(shared->graph_stage_events && shared->stage_sample_period > 0) {}

absl::StatusOr<std::unique_ptr<CudaWorker>> CudaWorker::Create(const BackendShared* shared) {
  std::unique_ptr<CudaWorker> w(new CudaWorker(shared));
  RETURN_IF_ERROR(w->Allocate());
  return w;
}

absl::Status CudaWorker::Allocate() {
  const GpuLayout& g = shared_->layout;
  const uint32_t n = shared_->max_bucket;
  ASSIGN_OR_RETURN(stream_, CreateStream());
  ASSIGN_OR_RETURN(lt_, CreateLtHandle());
  for (int e = 0; e < kEvents; ++e) {
    // The last one marks the batch done and is waited on (asleep unless configured to spin).
    const bool done = e == kEvents - 1;
    ASSIGN_OR_RETURN(events_[e], CreateEvent(done && shared_->blocking_wait ? cudaEventBlockingSync
                                                                            : cudaEventDefault));
  }
  ASSIGN_OR_RETURN(workspace_,
                   DeviceBuffer::Allocate(shared_->workspace_bytes, "cuBLASLt workspace"));
  ASSIGN_OR_RETURN(h_out_, PinnedBuffer::Allocate(n * sizeof(kernels::ScoredPair), "results"));
  ASSIGN_OR_RETURN(d_out_, DeviceBuffer::Allocate(n * sizeof(kernels::ScoredPair), "results"));
  ASSIGN_OR_RETURN(h_logits_, PinnedBuffer::Allocate(n * sizeof(float), "logits"));
  ASSIGN_OR_RETURN(logits_, DeviceBuffer::Allocate(n * sizeof(float), "logits"));
  ASSIGN_OR_RETURN(h_, DeviceBuffer::Allocate(Floats(n, g.h_ld), "interaction output"));
  ASSIGN_OR_RETURN(hidden0_, DeviceBuffer::Allocate(Floats(n, g.hidden_ld), "hidden"));
  ASSIGN_OR_RETURN(hidden1_, DeviceBuffer::Allocate(Floats(n, g.hidden_ld), "hidden"));
  if (g.bottom_mlp) {
    ASSIGN_OR_RETURN(x_, DeviceBuffer::Allocate(Floats(n, g.x_ld), "dense input"));
  }
  if (g.user_tables > 0) {
    ASSIGN_OR_RETURN(user_, DeviceBuffer::Allocate(Floats(n, g.user_ld), "pooled user vectors"));
  }
  if (g.interaction == Interaction::kDot && g.item_tables > 0) {
    ASSIGN_OR_RETURN(item_, DeviceBuffer::Allocate(Floats(n, g.item_ld), "pooled item vectors"));
  }
  if (shared_->bottom != nullptr) {
    bottom_io_ = ChainIo(shared_->bottom->num_layers(), x_.get<float>(), hidden0_.get<float>(),
                         hidden1_.get<float>(), h_.get<float>());
  }
  const float* top_in = h_.get<float>();
  if (!shared_->dcn.empty()) {
    ASSIGN_OR_RETURN(dcn_, DcnStage::Create(g, shared_->dcn, n, h_.get<float>()));
    top_in = dcn_->output();
  }
  top_io_ = ChainIo(shared_->top->num_layers(), top_in, hidden0_.get<float>(),
                    hidden1_.get<float>(), logits_.get<float>());
  graphs_.resize(shared_->buckets.size() * kernels::kNumTopKShapes * 2);  // id prefetch off, on
  RETURN_IF_ERROR(AllocateHotCache());
  kernels::PackedHeader empty;
  empty.total_bytes = kInitialStagingBytes;
  return EnsureStaging(empty);
}

bool PrefetchIds(kernels::RowType row_type, const kernels::PackedHeader& h, uint64_t min_ids) {
  const uint64_t ids = uint64_t{h.num_user_ids} + h.num_item_ids;
  const uint64_t bags = uint64_t{h.num_user_bags} + h.num_item_bags;
  return row_type == kernels::RowType::kF32 && ids >= min_ids && 4 * ids <= 5 * bags;
}

absl::Status CudaWorker::EnsureStaging(const kernels::PackedHeader& h) {
  // Everything new is allocated first; the old buffers go only once all of it succeeded.
  PinnedBuffer h_stage;
  DeviceBuffer d_stage;
  DeviceBuffer d_gathered;
  if (h.total_bytes > h_stage_.bytes()) {
    const size_t bytes = std::max<size_t>(h.total_bytes, 2 * h_stage_.bytes());
    ASSIGN_OR_RETURN(h_stage, PinnedBuffer::Allocate(bytes, "batch staging"));
    ASSIGN_OR_RETURN(d_stage, DeviceBuffer::Allocate(bytes, "batch staging"));
  }
  // With reorder on, at least one row: a key captured on a batch without ids has the gather
  // node too, so a grow can re-point it (cudaGraphExecUpdate refuses another node count).
  const size_t gathered =
      std::max<size_t>(h.num_unique, shared_->reorder_ids ? 1 : 0) * shared_->layout.gather_stride;
  if (gathered > d_gathered_.bytes()) {
    const size_t bytes = std::max(gathered, 2 * d_gathered_.bytes());
    ASSIGN_OR_RETURN(d_gathered, DeviceBuffer::Allocate(bytes, "gathered rows"));
  }
  const bool grown = h_stage.get() != nullptr || d_gathered.get() != nullptr;
  if (h_stage.get() != nullptr) {
    h_stage_ = std::move(h_stage);
    d_stage_ = std::move(d_stage);
  }
  if (d_gathered.get() != nullptr) d_gathered_ = std::move(d_gathered);
  if (grown) {
    // Captured graphs hold the old pointers: none is launched until its key's next batch
    // has re-pointed it at the new buffers (RecaptureAfterGrow).
    // A key missing a variant (a failed capture) drops what it has instead: its next
    // capture waits for the retry policy's backoff, as before the grow.
    for (GraphSlot& g : graphs_) {
      if (Ready(g)) {
        g.regrow = true;
      } else {
        g.exec.Reset();
        g.timed.Reset();
      }
    }
    ++stats_.staging_grows;
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::EnqueueLookup(uint32_t bucket) {
  const GpuLayout& g = shared_->layout;
  const DeviceModel& m = *shared_->model;
  cudaStream_t s = stream_.get();
  const unsigned char* batch = d_stage_.get<unsigned char>();
  const bool gather = shared_->reorder_ids && (g.user_tables + g.item_tables) > 0;
  if (gather) {
    kernels::GatherArgs ga;
    ga.d_batch = batch;
    ga.d_tables = m.d_tables();
    ga.d_gathered = d_gathered_.get<unsigned char>();
    ga.stride = g.gather_stride;
    ga.max_unique = std::min<uint64_t>(d_gathered_.bytes() / g.gather_stride,
                                       uint64_t{bucket} * (g.user_tables + g.item_tables));
    RETURN_IF_CUDA_ERROR(kernels::LaunchGatherUniqueRows(ga, s), "gather unique rows");
    ++launches_;
  }
  kernels::LookupArgs la;
  la.d_batch = batch;
  la.d_tables = m.d_tables();
  la.user_tables = g.user_tables;
  la.item_tables = g.item_tables;
  la.d_user_out = user_.get<float>();
  la.user_ld = g.user_ld;
  const bool dot = g.interaction == Interaction::kDot;
  la.d_item_out = dot ? item_.get<float>() : h_.get<float>();
  la.item_ld = dot ? g.item_ld : g.h_ld;
  if (g.dense_user + g.dense_item > 0) {
    la.d_dense_out = g.bottom_mlp ? x_.get<float>() : h_.get<float>();
    la.dense_ld = g.bottom_mlp ? g.x_ld : g.h_ld;
  }
  la.dense_user = g.dense_user;
  la.dense_item = g.dense_item;
  if (gather) {
    la.d_gathered = d_gathered_.get<unsigned char>();
    la.gather_stride = g.gather_stride;
  }
  la.max_candidates = bucket;
  la.max_requests = bucket;
  la.lanes = g.lanes;
  la.row_type = g.row_type;
  la.prefetch_ids = prefetch_ids_;
  if (shared_->hot_cache != nullptr) {
    la.d_hot = d_hot_.get<kernels::HotCacheTable>();
    la.d_hot_counts = d_hot_counts_.get<unsigned long long>();
  }
  RETURN_IF_CUDA_ERROR(kernels::LaunchPooledLookup(la, s), "pooled lookup");
  ++launches_;
  return absl::OkStatus();
}

absl::Status CudaWorker::EnqueueInteraction(uint32_t bucket) {
  const GpuLayout& g = shared_->layout;
  const DeviceModel& m = *shared_->model;
  cudaStream_t s = stream_.get();
  const unsigned char* batch = d_stage_.get<unsigned char>();
  if (g.interaction == Interaction::kDot) {
    kernels::DotArgs da;
    da.d_batch = batch;
    da.d_slots = m.d_dot_slots();
    da.num_tables = g.user_tables + g.item_tables;
    da.dim = g.dim;
    da.d_user = user_.get<float>();
    da.user_ld = g.user_ld;
    da.d_item = item_.get<float>();
    da.item_ld = g.item_ld;
    da.d_h = h_.get<float>();
    da.h_ld = g.h_ld;
    da.z_width = g.z_width;
    da.max_candidates = bucket;
    da.max_shared_bytes = shared_->dot_shared_bytes;
    RETURN_IF_CUDA_ERROR(kernels::LaunchDotInteraction(da, s), "dot interaction");
    ++launches_;
  } else if (g.user_tables > 0) {
    kernels::ConcatUserArgs ca;
    ca.d_batch = batch;
    ca.d_slots = m.d_concat_slots();
    ca.num_slots = g.user_tables;
    ca.d_user = user_.get<float>();
    ca.user_ld = g.user_ld;
    ca.d_h = h_.get<float>();
    ca.h_ld = g.h_ld;
    ca.max_candidates = bucket;
    RETURN_IF_CUDA_ERROR(kernels::LaunchConcatUser(ca, s), "concat user vectors");
    ++launches_;
  }
  return absl::OkStatus();
}

absl::Status CudaWorker::EnqueueTopK(uint32_t bucket, int shape) {
  kernels::TopKArgs ta;
  ta.d_batch = d_stage_.get<unsigned char>();
  ta.d_logits = logits_.get<float>();
  ta.d_out = d_out_.get<kernels::ScoredPair>();
  ta.shape = shape;
  ta.max_requests = bucket;
  RETURN_IF_CUDA_ERROR(kernels::LaunchSegmentedTopK(ta, stream_.get()), "segmented top-K");
  ++launches_;
  return absl::OkStatus();
}

absl::Status CudaWorker::EnqueueForward(int bucket_index, int shape, bool in_graph, bool timed) {
  const uint32_t bucket = shared_->buckets[bucket_index];
  cudaStream_t s = stream_.get();
  // In a capture a plain record is only an ordering point; cudaEventRecordExternal makes it
  // a node of the graph that records the event each time the graph runs.
  auto mark = [&](int e) -> absl::Status {
    if (in_graph && !timed) return absl::OkStatus();
    RETURN_IF_CUDA_ERROR(
        cudaEventRecordWithFlags(events_[e].get(), s,
                                 in_graph ? cudaEventRecordExternal : cudaEventRecordDefault),
        "cudaEventRecord");
    return absl::OkStatus();
  };
  void* ws = workspace_.get();
  const size_t ws_bytes = workspace_.bytes();
  RETURN_IF_ERROR(EnqueueLookup(bucket));
  RETURN_IF_ERROR(mark(1));
  if (shared_->bottom != nullptr) {
    RETURN_IF_ERROR(
        shared_->bottom->Enqueue(lt_.get(), bucket_index, bottom_io_, ws, ws_bytes, s, &launches_));
  }
  RETURN_IF_ERROR(mark(2));
  RETURN_IF_ERROR(EnqueueInteraction(bucket));
  if (dcn_ != nullptr) {
    RETURN_IF_ERROR(dcn_->Enqueue(lt_.get(), bucket_index, bucket, ws, ws_bytes, s, &launches_));
  }
  RETURN_IF_ERROR(mark(3));
  RETURN_IF_ERROR(
      shared_->top->Enqueue(lt_.get(), bucket_index, top_io_, ws, ws_bytes, s, &launches_));
  RETURN_IF_ERROR(mark(4));
  return EnqueueTopK(bucket, shape);
}

absl::Status CudaWorker::Execute(const kernels::PackedHeader& h, int bucket_index, int shape,
                                 bool replay) {
  const absl::Status status = ExecuteSteps(h, bucket_index, shape, replay);
  if (status.ok()) return status;
  // A step that reports its own error (cuBLASLt's EXECUTION_FAILED, say) may stand in for a
  // fault an earlier kernel met: the sync says so, and a context-fatal one is the answer.
  const cudaError_t synced = cudaStreamSynchronize(stream_.get());
  static_cast<void>(cudaGetLastError());
  if (!IsDeviceFault(status) && IsContextFatalCudaError(static_cast<int>(synced))) {
    return CudaStatus(synced, absl::StrCat("batch on the GPU, after: ", status.message()));
  }
  return status;
}

absl::Status CudaWorker::ExecuteSteps(const kernels::PackedHeader& h, int bucket_index, int shape,
                                      bool replay) {
  cudaStream_t s = stream_.get();
  RETURN_IF_CUDA_ERROR(cudaEventRecord(events_[0].get(), s), "cudaEventRecord");
  RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(d_stage_.get(), h_stage_.get(), h.total_bytes, cudaMemcpyHostToDevice, s),
      "copy batch to device");
  if (replay) {
    const GraphSlot& slot = Slot(bucket_index, shape);
    const GraphExec& graph = timed_ ? slot.timed : slot.exec;
    RETURN_IF_CUDA_ERROR(cudaGraphLaunch(graph.get(), s), "cudaGraphLaunch");
    ++launches_;
    ++stats_.graph_launches;
  } else {
    RETURN_IF_ERROR(EnqueueForward(bucket_index, shape, /*in_graph=*/false, /*timed=*/true));
  }
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(h_out_.get(), d_out_.get(),
                                       size_t{h.total_results} * sizeof(kernels::ScoredPair),
                                       cudaMemcpyDeviceToHost, s),
                       "copy results to host");
  if (h.max_segment > kernels::kMaxTopKSegment) {
    RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(h_logits_.get(), logits_.get(), size_t{h.num_candidates} * sizeof(float),
                        cudaMemcpyDeviceToHost, s),
        "copy logits to host");
  }
  if (read_hot_counts_) {
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(h_hot_counts_.get(), d_hot_counts_.get(),
                                         d_hot_counts_.bytes(), cudaMemcpyDeviceToHost, s),
                         "copy hot-row counters to host");
  }
  RETURN_IF_CUDA_ERROR(cudaEventRecord(events_[5].get(), s), "cudaEventRecord");
  RETURN_IF_CUDA_ERROR(cudaEventSynchronize(events_[5].get()), "batch on the GPU");
  return absl::OkStatus();
}

absl::Status CudaWorker::Run(const Batch& batch, BatchResult* result) {
  RETURN_IF_CUDA_ERROR(cudaSetDevice(shared_->gpu), "cudaSetDevice");
  // An error left by an earlier, handled failure must not fail this batch's launches.
  static_cast<void>(cudaGetLastError());
  result->Clear();
  ASSIGN_OR_RETURN(const kernels::PackedHeader h, packer_.Plan(batch));  // checks the batch
  const uint32_t rows = std::max(h.num_candidates, h.num_requests);
  if (rows > shared_->max_bucket) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", h.num_candidates, " candidates and ", h.num_requests,
                     " requests exceeds the CUDA backend's ", shared_->max_bucket));
  }
  result->result_begin.assign(packer_.result_begin().begin(), packer_.result_begin().end());
  if (h.total_results == 0) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureStaging(h));
  packer_.Write(batch, h, h_stage_.get());

  const int bucket_index = kernels::BucketIndex(kernels::CandidateBucket(rows));
  // The hot-row cache's kernel reads one bag after another (no id prefetch).
  prefetch_ids_ = shared_->hot_cache == nullptr &&
                  PrefetchIds(shared_->layout.row_type, h, shared_->prefetch_min_ids);
  RETURN_IF_ERROR(RefreshHotCache());
  const int shape = kernels::TopKShapeIndex(h.max_segment);
  const bool use_graphs = shared_->cuda_graphs;
  GraphSlot& slot = Slot(bucket_index, shape);
  // One batch of the key in stage_sample_period replays the timed variant (all of them
  // when it is the only one kept); counted per key, so every key's stages are sampled.
  timed_ =
      want_timed_ &&
      (!want_plain_ || slot.batches++ % static_cast<uint64_t>(shared_->stage_sample_period) == 0);
  bool replay = use_graphs && Ready(slot) && !slot.regrow;
  const bool recaptured = use_graphs && slot.regrow;
  if (recaptured) replay = RecaptureAfterGrow(bucket_index, shape, result);
  launches_ = 0;
  RETURN_IF_ERROR(Execute(h, bucket_index, shape, replay));
  result->items.resize(h.total_results);
  std::memcpy(result->items.data(), h_out_.get(), h.total_results * sizeof(kernels::ScoredPair));
  if (h.max_segment > kernels::kMaxTopKSegment) RankLongRequestsOnHost(batch, result);
  FillStageTimes(/*staged=*/!replay || timed_, result);
  ++stats_.batches;
  stats_.last_launches = launches_;
  stats_.last_used_graph = replay;
  // (A failed recapture was this batch's try: the next waits for the retry's backoff.)
  if (use_graphs && !replay && !recaptured) MaybeCapture(bucket_index, shape, result);
  RecordLookups();
  return absl::OkStatus();
}

}  // namespace fuserank::engine::cuda

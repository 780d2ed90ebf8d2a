// The CUDA graphs of a CudaWorker: one per (size bucket, top-K shape, id prefetch), each in
// the variants the stage sampling keeps (with and without the stage-event nodes): their
// capture, their re-pointing after a staging grow, and the backoff after a failed capture.
#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/status_macros.h"
#include "kernels/topk_keys.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine::cuda {

CudaWorker::GraphSlot& CudaWorker::Slot(int bucket_index, int shape) {
  return graphs_[(bucket_index * kernels::kNumTopKShapes + shape) * 2 + (prefetch_ids_ ? 1 : 0)];
}

absl::Status CudaWorker::CaptureVariant(int bucket_index, int shape, bool timed, bool update,
                                        GraphExec* exec, bool* updated) {
  *updated = false;
  cudaStream_t s = stream_.get();
  RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
  const int launches = launches_;
  const absl::Status enqueued = EnqueueForward(bucket_index, shape, /*in_graph=*/true, timed);
  launches_ = launches;
  cudaGraph_t raw = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &raw);
  Graph graph(raw);
  RETURN_IF_ERROR(enqueued);
  RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
  if (raw == nullptr) return absl::InternalError("cudaStreamEndCapture returned no graph");
  if (update && *exec) {
    // The same forward pass on other buffers: the same nodes with new parameters, so the
    // instantiated graph takes them in place (cheaper than a new instantiation).
    cudaGraphExecUpdateResultInfo info = {};
    const cudaError_t refused = cudaGraphExecUpdate(exec->get(), graph.get(), &info);
    if (refused == cudaSuccess) {
      *updated = true;
      return absl::OkStatus();
    }
    static_cast<void>(cudaGetLastError());  // refused: instantiate it anew below
    const bool first = stats_.graph_update_refusal.empty();
    stats_.graph_update_refusal =
        absl::StrCat(cudaGetErrorName(refused), ", update result ", static_cast<int>(info.result));
    if (first) {
      spdlog::warn(
          "cuda: a graph could not be re-pointed in place after a staging grow ({}); "
          "it is instantiated anew",
          stats_.graph_update_refusal);
    }
  }
  exec->Reset();
  cudaGraphExec_t instantiated = nullptr;
  RETURN_IF_CUDA_ERROR(cudaGraphInstantiate(&instantiated, graph.get(), 0), "cudaGraphInstantiate");
  *exec = GraphExec(instantiated);
  return absl::OkStatus();
}

absl::Status CudaWorker::Capture(int bucket_index, int shape) {
  GraphSlot& slot = Slot(bucket_index, shape);
  bool plain_updated = true;
  bool timed_updated = true;
  if (want_plain_) {
    RETURN_IF_ERROR(
        CaptureVariant(bucket_index, shape, false, slot.regrow, &slot.exec, &plain_updated));
  }
  if (want_timed_) {
    RETURN_IF_ERROR(
        CaptureVariant(bucket_index, shape, true, slot.regrow, &slot.timed, &timed_updated));
  }
  ++stats_.graphs_captured;
  if (slot.regrow && plain_updated && timed_updated) ++stats_.graphs_updated;
  return absl::OkStatus();
}

void CudaWorker::MaybeCapture(int bucket_index, int shape, BatchResult* result) {
  GraphSlot& slot = Slot(bucket_index, shape);
  slot.retry.RanEagerly();
  if (!slot.retry.ShouldCapture()) return;
  const absl::Status captured = Capture(bucket_index, shape);
  // A failed capture may leave an error for the next call to report: clear it.
  static_cast<void>(cudaGetLastError());
  if (captured.ok()) {
    slot.retry.CaptureSucceeded();
    return;
  }
  CaptureFailed(slot, bucket_index, shape, captured, result);
}

bool CudaWorker::RecaptureAfterGrow(int bucket_index, int shape, BatchResult* result) {
  GraphSlot& slot = Slot(bucket_index, shape);
  const absl::Status captured = Capture(bucket_index, shape);
  slot.regrow = false;
  static_cast<void>(cudaGetLastError());
  if (captured.ok()) {
    slot.retry.CaptureSucceeded();
    return true;
  }
  slot.exec.Reset();  // they may still point at the old buffers
  slot.timed.Reset();
  CaptureFailed(slot, bucket_index, shape, captured, result);
  return false;
}

void CudaWorker::CaptureFailed(GraphSlot& slot, int bucket_index, int shape,
                               const absl::Status& why, BatchResult* result) {
  // The batch is scored; this key runs eagerly and is captured again after a backoff.
  slot.retry.CaptureFailed();
  ++stats_.graph_capture_failures;
  ++result->graph_capture_failures;
  stats_.graph_error = std::string(why.message());
  const uint32_t bucket = shared_->buckets[bucket_index];
  if (slot.retry.failures() == 1) {
    spdlog::warn(
        "cuda:{}: capturing the graph of size bucket {} (top-K shape {}) failed; that bucket "
        "runs without a graph and is retried with backoff: {}",
        shared_->gpu, bucket, shape, stats_.graph_error);
  } else {
    spdlog::debug("cuda:{}: graph capture of size bucket {} failed again ({} times): {}",
                  shared_->gpu, bucket, slot.retry.failures(), stats_.graph_error);
  }
}

}  // namespace fuserank::engine::cuda

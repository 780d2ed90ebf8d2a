// What a CudaWorker does with a batch once the GPU is done: the stage times from its
// events and the top-K of requests longer than the GPU sorts.
#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_worker.h"
#include "engine/topk.h"
#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"

namespace fuserank::engine::cuda {
namespace {

double Seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.0f;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1e-3 : 0.0;
}

}  // namespace

void CudaWorker::FillStageTimes(bool staged, BatchResult* result) {
  cudaEvent_t e[6];
  for (int i = 0; i < 6; ++i) e[i] = events_[i].get();
  stats_.last_device_seconds = Seconds(e[0], e[5]);
  StageTimes& st = result->stages;
  if (!staged) {  // a graph replayed without stage events
    st.timed = false;
    return;
  }
  st.lookup = Seconds(e[0], e[1]);  // copy in, gather, lookup
  st.dnn = Seconds(e[1], e[2]) + Seconds(e[3], e[4]);
  st.cross = Seconds(e[2], e[3]);
  st.topk = Seconds(e[4], e[5]);  // top-K and copy out
}

void CudaWorker::RankLongRequestsOnHost(const Batch& batch, BatchResult* result) {
  const float* logits = h_logits_.get<float>();
  for (int r = 0; r < batch.num_requests(); ++r) {
    const uint32_t begin = batch.candidate_begin[r];
    const uint32_t count = batch.candidate_begin[r + 1] - begin;
    if (count <= kernels::kMaxTopKSegment) continue;
    scratch_score_.resize(count);
    for (uint32_t i = 0; i < count; ++i)
      scratch_score_[i] = kernels::ScoreOfLogit(logits[begin + i]);
    const uint32_t k = result->result_begin[r + 1] - result->result_begin[r];
    // The engine's top-K: the one order rule (score descending, NaN last, ties by index).
    TopK(scratch_score_.data(), static_cast<int>(count), static_cast<int>(k),
         result->items.data() + result->result_begin[r]);
  }
}

}  // namespace fuserank::engine::cuda

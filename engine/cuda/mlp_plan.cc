#include "engine/cuda/mlp_plan.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_memory.h"
#include "engine/status_macros.h"

namespace fuserank::engine::cuda {
namespace {

// Algorithms asked of the heuristic per (layer, size bucket), best first.
constexpr int kHeuristicResults = 8;

absl::StatusOr<LtLayout> Layout(uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, rows, cols, ld),
                         "cublasLtMatrixLayoutCreate");
  return LtLayout(layout);
}

absl::StatusOr<LtMatmulDesc> MatmulDesc(const MlpLayerShape& s, bool allow_tf32) {
  cublasLtMatmulDesc_t desc = nullptr;
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescCreate(
          &desc, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  LtMatmulDesc owned(desc);
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  const cublasOperation_t trans_b = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = s.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const void* bias = s.d_bias;
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)),
      "set TRANSA");
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)),
      "set TRANSB");
  RETURN_IF_CUBLAS_ERROR(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                        &epilogue, sizeof(epilogue)),
                         "set EPILOGUE");
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
      "set BIAS_POINTER");
  return owned;
}

// Buffers and a stream on which each candidate algorithm is run once when a plan is
// built: a NOT_SUPPORTED (or any failure) then costs a fallback at load, not every batch.
// The events time them for the autotune.
struct Trial {
  Stream stream;
  DeviceBuffer in, out, workspace;
  Event start, stop;
};

// Autotune: kTimedRuns matmuls per algorithm in one graph, timed over kTimedRounds
// launches; the fastest round counts.
constexpr int kTimedRounds = 2;
constexpr int kTimedRuns = 3;
// A proposal replaces the heuristic's first only when it takes less than this share of
// its time.
constexpr double kBetterThan = 0.9;

absl::StatusOr<Trial> MakeTrial(const std::vector<MlpLayerShape>& layers, uint32_t max_rows,
                                size_t workspace_bytes) {
  size_t in_floats = 0;
  size_t out_floats = 0;
  for (const MlpLayerShape& s : layers) {
    in_floats = std::max(in_floats, size_t{max_rows} * s.in_ld);
    out_floats = std::max(out_floats, size_t{max_rows} * s.out_ld);
  }
  Trial t;
  ASSIGN_OR_RETURN(t.stream, CreateStream());
  ASSIGN_OR_RETURN(t.in, DeviceBuffer::Allocate(in_floats * sizeof(float), "MLP trial input"));
  ASSIGN_OR_RETURN(t.out, DeviceBuffer::Allocate(out_floats * sizeof(float), "MLP trial output"));
  ASSIGN_OR_RETURN(t.workspace, DeviceBuffer::Allocate(workspace_bytes, "MLP trial workspace"));
  ASSIGN_OR_RETURN(t.start, CreateEvent());
  ASSIGN_OR_RETURN(t.stop, CreateEvent());
  return t;
}

// One matmul of `algo` on the trial buffers, enqueued.
absl::Status EnqueueTrial(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                          const MlpLayerShape& s, cublasLtMatrixLayout_t a,
                          cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                          const cublasLtMatmulAlgo_t& algo, const Trial& t) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmul(handle, desc, &alpha, s.d_weight, a, t.in.get(), b, &beta, t.out.get(), d,
                     t.out.get(), d, &algo, t.workspace.get(), t.workspace.bytes(), t.stream.get()),
      "cublasLtMatmul");
  return absl::OkStatus();
}

// Runs `algo` once on the trial buffers and waits for it.
absl::Status TryAlgo(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const MlpLayerShape& s,
                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                     const cublasLtMatmulAlgo_t& algo, const Trial& t) {
  RETURN_IF_ERROR(EnqueueTrial(handle, desc, s, a, b, d, algo, t));
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(t.stream.get()), "cudaStreamSynchronize");
  return absl::OkStatus();
}

// Device microseconds per matmul of `algo` as a graph replays it: kTimedRuns matmuls
// between two event-record nodes, captured into one graph, launched once to warm up and
// then kTimedRounds times (the fastest counts). The events are nodes of the graph, so the
// time is the device's from the first matmul to the last. Timing matmuls as the host
// issues them would time the host at small batches, where a matmul runs about as long as
// its launch takes to issue; the server replays its MLPs in graphs, with no host between.
absl::StatusOr<double> TimeAlgo(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                const MlpLayerShape& s, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                                const cublasLtMatmulAlgo_t& algo, const Trial& t) {
  cudaStream_t stream = t.stream.get();
  RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
  // In a capture a plain record is only an ordering point; cudaEventRecordExternal makes
  // it a node that records when the graph runs.
  absl::Status enqueued = CudaStatus(
      cudaEventRecordWithFlags(t.start.get(), stream, cudaEventRecordExternal), "cudaEventRecord");
  for (int run = 0; run < kTimedRuns && enqueued.ok(); ++run) {
    enqueued = EnqueueTrial(handle, desc, s, a, b, d, algo, t);
  }
  if (enqueued.ok()) {
    enqueued = CudaStatus(cudaEventRecordWithFlags(t.stop.get(), stream, cudaEventRecordExternal),
                          "cudaEventRecord");
  }
  cudaGraph_t raw = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &raw);
  const Graph graph(raw);
  RETURN_IF_ERROR(enqueued);
  RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
  if (raw == nullptr) return absl::InternalError("cudaStreamEndCapture returned no graph");
  cudaGraphExec_t instantiated = nullptr;
  RETURN_IF_CUDA_ERROR(cudaGraphInstantiate(&instantiated, graph.get(), 0), "cudaGraphInstantiate");
  const GraphExec exec(instantiated);
  double best = 0;
  for (int round = 0; round <= kTimedRounds; ++round) {  // round 0 warms up
    RETURN_IF_CUDA_ERROR(cudaGraphLaunch(exec.get(), stream), "cudaGraphLaunch");
    RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    float ms = 0;
    RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, t.start.get(), t.stop.get()),
                         "cudaEventElapsedTime");
    const double us = 1e3 * ms / kTimedRuns;
    if (round == 1 || (round > 1 && us < best)) best = us;
  }
  return best;
}

// Of the proposals that ran (`ran`, indices into `results`, heuristic order), the one
// autotune keeps; `choice` gets the times. A failed timing keeps the heuristic's first.
int Autotune(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const MlpLayerShape& s,
             cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
             const cublasLtMatmulHeuristicResult_t* results, const std::vector<int>& ran,
             const Trial& t, AlgoChoice* choice) {
  std::vector<double> us;
  for (int i : ran) {
    absl::StatusOr<double> time = TimeAlgo(handle, desc, s, a, b, d, results[i].algo, t);
    if (!time.ok()) {
      static_cast<void>(cudaStreamSynchronize(t.stream.get()));
      static_cast<void>(cudaGetLastError());
      return ran.front();
    }
    us.push_back(*time);
  }
  size_t best = 0;
  for (size_t k = 1; k < us.size(); ++k) {
    if (us[k] < kBetterThan * us[0] && us[k] < us[best]) best = k;
  }
  choice->first_us = us[0];
  choice->chosen_us = us[best];
  return ran[best];
}

// The algorithm for one (layer, size bucket): the heuristic's first that reports success
// and runs, or with `autotune` the fastest of those that run (above).
absl::StatusOr<cublasLtMatmulAlgo_t> ChooseAlgo(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                const MlpLayerShape& s, cublasLtMatrixLayout_t a,
                                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                                                cublasLtMatmulPreference_t pref, const Trial& t,
                                                bool autotune, AlgoChoice* choice) {
  cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
  int found = 0;
  RETURN_IF_CUBLAS_ERROR(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, pref,
                                                        kHeuristicResults, results, &found),
                         "cublasLtMatmulAlgoGetHeuristic");
  std::string tried;
  std::vector<int> ran;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) {
      absl::StrAppend(&tried, "; candidate ", i, ": state ", static_cast<int>(results[i].state));
      continue;
    }
    const absl::Status status = TryAlgo(handle, desc, s, a, b, d, results[i].algo, t);
    if (status.ok()) {
      ran.push_back(i);
      if (!autotune) break;
      continue;
    }
    // A failed trial may leave an error for the next call to report.
    static_cast<void>(cudaGetLastError());
    absl::StrAppend(&tried, "; candidate ", i, ": ", status.message());
  }
  if (ran.empty()) {
    return absl::InternalError(
        absl::StrCat("cuBLASLt has no algorithm that runs (", found, " proposed", tried, ")"));
  }
  *choice = AlgoChoice();
  choice->ran = static_cast<int>(ran.size());
  choice->index =
      ran.size() > 1 ? Autotune(handle, desc, s, a, b, d, results, ran, t, choice) : ran.front();
  // What the kept algorithm computes with, for the tests and the bench's report; a library
  // that does not say leaves 0.
  uint64_t flags = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&results[choice->index].algo,
                                        CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &flags,
                                        sizeof(flags), &written) == CUBLAS_STATUS_SUCCESS &&
      written == sizeof(flags)) {
    choice->numerical_flags = flags;
  }
  return results[choice->index].algo;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MlpPlan>> MlpPlan::Create(cublasLtHandle_t handle,
                                                         std::vector<MlpLayerShape> layers,
                                                         std::vector<uint32_t> buckets,
                                                         bool allow_tf32, size_t workspace_bytes,
                                                         bool autotune) {
  std::unique_ptr<MlpPlan> plan(new MlpPlan());
  plan->buckets_ = std::move(buckets);
  if (plan->buckets_.empty()) return absl::InternalError("MlpPlan: no size buckets");
  cublasLtMatmulPreference_t pref_raw = nullptr;
  RETURN_IF_CUBLAS_ERROR(cublasLtMatmulPreferenceCreate(&pref_raw),
                         "cublasLtMatmulPreferenceCreate");
  LtPreference pref(pref_raw);
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes)),
      "set MAX_WORKSPACE_BYTES");
  ASSIGN_OR_RETURN(const Trial trial, MakeTrial(layers, plan->buckets_.back(), workspace_bytes));
  for (size_t l = 0; l < layers.size(); ++l) {
    const MlpLayerShape& s = layers[l];
    const std::string where = absl::StrCat("MLP layer ", l, " (", s.in, " -> ", s.out, ")");
    Layer layer;
    layer.shape = s;
    ASSIGN_OR_RETURN(layer.desc, MatmulDesc(s, allow_tf32));
    if (s.w_ld < s.in) {
      return absl::InternalError(absl::StrCat(where, ": weight pitch ", s.w_ld, " < ", s.in));
    }
    ASSIGN_OR_RETURN(layer.a, Layout(s.in, s.out, s.w_ld));
    for (uint32_t n : plan->buckets_) {
      ASSIGN_OR_RETURN(LtLayout b, Layout(s.in, n, s.in_ld));
      ASSIGN_OR_RETURN(LtLayout d, Layout(s.out, n, s.out_ld));
      AlgoChoice choice;
      absl::StatusOr<cublasLtMatmulAlgo_t> algo =
          ChooseAlgo(handle, layer.desc.get(), s, layer.a.get(), b.get(), d.get(), pref_raw, trial,
                     autotune, &choice);
      if (!algo.ok()) return WithContext(algo.status(), absl::StrCat(where, ", ", n, " rows"));
      layer.b.push_back(std::move(b));
      layer.d.push_back(std::move(d));
      layer.algo.push_back(*algo);
      layer.choice.push_back(choice);
    }
    plan->layers_.push_back(std::move(layer));
  }
  return plan;
}

absl::Status MlpPlan::Enqueue(cublasLtHandle_t handle, int bucket_index,
                              absl::Span<const LayerIo> io, void* d_workspace,
                              size_t workspace_bytes, cudaStream_t stream, int* launches) const {
  if (io.size() != layers_.size() || bucket_index < 0 ||
      bucket_index >= static_cast<int>(buckets_.size())) {
    return absl::InternalError("MlpPlan::Enqueue: layer io or bucket out of range");
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    cublasLtMatrixLayout_t d = layer.d[bucket_index].get();
    RETURN_IF_CUBLAS_ERROR(
        cublasLtMatmul(handle, layer.desc.get(), &alpha, layer.shape.d_weight, layer.a.get(),
                       io[l].d_in, layer.b[bucket_index].get(), &beta, io[l].d_out, d, io[l].d_out,
                       d, &layer.algo[bucket_index], d_workspace, workspace_bytes, stream),
        absl::StrCat("cublasLtMatmul layer ", l));
    ++*launches;
  }
  return absl::OkStatus();
}

}  // namespace fuserank::engine::cuda

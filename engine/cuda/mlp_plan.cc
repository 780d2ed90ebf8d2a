#include "engine/cuda/mlp_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/status_macros.h"

namespace fuserank::engine::cuda {
namespace {

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

}  // namespace

absl::StatusOr<std::unique_ptr<MlpPlan>> MlpPlan::Create(cublasLtHandle_t handle,
                                                         std::vector<MlpLayerShape> layers,
                                                         std::vector<uint32_t> buckets,
                                                         bool allow_tf32, size_t workspace_bytes) {
  std::unique_ptr<MlpPlan> plan(new MlpPlan());
  plan->buckets_ = std::move(buckets);
  cublasLtMatmulPreference_t pref_raw = nullptr;
  RETURN_IF_CUBLAS_ERROR(cublasLtMatmulPreferenceCreate(&pref_raw),
                         "cublasLtMatmulPreferenceCreate");
  LtPreference pref(pref_raw);
  RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes)),
      "set MAX_WORKSPACE_BYTES");
  for (size_t l = 0; l < layers.size(); ++l) {
    const MlpLayerShape& s = layers[l];
    const std::string where = absl::StrCat("MLP layer ", l, " (", s.in, " -> ", s.out, ")");
    Layer layer;
    layer.shape = s;
    ASSIGN_OR_RETURN(layer.desc, MatmulDesc(s, allow_tf32));
    ASSIGN_OR_RETURN(layer.a, Layout(s.in, s.out, s.in));
    for (uint32_t n : plan->buckets_) {
      ASSIGN_OR_RETURN(LtLayout b, Layout(s.in, n, s.in_ld));
      ASSIGN_OR_RETURN(LtLayout d, Layout(s.out, n, s.out_ld));
      cublasLtMatmulHeuristicResult_t result = {};
      int found = 0;
      RETURN_IF_CUBLAS_ERROR(
          cublasLtMatmulAlgoGetHeuristic(handle, layer.desc.get(), layer.a.get(), b.get(), d.get(),
                                         d.get(), pref_raw, 1, &result, &found),
          absl::StrCat(where, ": cublasLtMatmulAlgoGetHeuristic for ", n, " rows"));
      if (found == 0) {
        return absl::InternalError(
            absl::StrCat(where, ": cuBLASLt has no algorithm for ", n, " rows"));
      }
      layer.b.push_back(std::move(b));
      layer.d.push_back(std::move(d));
      layer.algo.push_back(result.algo);
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

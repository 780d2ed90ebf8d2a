// One worker's DCNv2 cross network (interaction: dcn) on the GPU: per layer the cuBLASLt
// GEMMs of its MlpPlan (V_l then U_l + b_l at low rank, W_l + b_l at full rank) into y,
// then the elementwise kernel x_{l+1} = x0 * y + x_l (kernels/cross.h), x_l updated in
// place. Everything is enqueued on the worker's stream, so it is captured in the batch's
// CUDA graph with the rest of the forward pass. Owned by one CudaWorker; not thread-safe.
#ifndef FUSERANK_ENGINE_CUDA_DCN_STAGE_H_
#define FUSERANK_ENGINE_CUDA_DCN_STAGE_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/cuda/mlp_plan.h"

namespace fuserank::engine::cuda {

class DcnStage {
 public:
  // Buffers for `max_rows` candidates; `plans` has one plan per layer (CreateDcnPlans);
  // `d_x0` is the worker's h ([max_rows, layout.h_ld]), which the stage only reads.
  static absl::StatusOr<std::unique_ptr<DcnStage>> Create(const GpuLayout& layout,
                                                          const std::vector<const MlpPlan*>& plans,
                                                          uint32_t max_rows, const float* d_x0);

  // Enqueues every layer for `bucket` rows (bucket_index into the plans' buckets).
  absl::Status Enqueue(cublasLtHandle_t handle, int bucket_index, uint32_t bucket, void* d_ws,
                       size_t ws_bytes, cudaStream_t stream, int* launches) const;

  // x_L, [max_rows, layout.h_ld]: the top MLP's input.
  const float* output() const { return xl_.get<float>(); }

 private:
  DcnStage() = default;

  std::vector<const MlpPlan*> plans_;
  std::vector<std::vector<LayerIo>> io_;  // per layer, per GEMM
  const float* d_x0_ = nullptr;
  int ld_ = 0;
  int width_ = 0;
  DeviceBuffer xl_, y_, t_;
};

// The plans of `layers` (DeviceModel::dcn()): per layer one MlpPlan of its GEMMs, no ReLU,
// reading x_l (pitch h_ld) and writing y (pitch h_ld) through V_l x_l (pitch dcn_t_ld).
absl::StatusOr<std::vector<std::unique_ptr<MlpPlan>>> CreateDcnPlans(
    cublasLtHandle_t handle, const GpuLayout& layout,
    const std::vector<std::vector<MlpLayerShape>>& layers, const std::vector<uint32_t>& buckets,
    bool allow_tf32, size_t workspace_bytes, bool autotune);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DCN_STAGE_H_

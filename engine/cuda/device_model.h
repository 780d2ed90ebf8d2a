// A model's read-only state on one GPU: embedding tables in device memory, or with
// cache.placement: host in page-locked host memory mapped into the device's address space
// (fp32, fp16 and bf16 as stored; int8 with each row's scale and bias beside its codes:
// engine/cuda/device_rows.h), the lookup descriptors and interaction slot lists, and
// the MLP weights and biases. Uploaded once at backend creation; then immutable and
// shared by every worker.
#ifndef FUSERANK_ENGINE_CUDA_DEVICE_MODEL_H_
#define FUSERANK_ENGINE_CUDA_DEVICE_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/cuda/mlp_plan.h"
#include "engine/model.h"
#include "kernels/descriptors.h"

namespace fuserank::engine::cuda {

class DeviceModel {
 public:
  // REQUIRES: the current device is the target GPU; `layout` was computed for `model`.
  // `host_tables`: every table's rows go to mapped host memory (the descriptors' d_rows
  // are their device addresses) instead of device memory.
  static absl::StatusOr<std::unique_ptr<DeviceModel>> Upload(const Model& model,
                                                             const GpuLayout& layout,
                                                             bool host_tables = false);

  const kernels::LookupTable* d_tables() const { return tables_desc_.get<kernels::LookupTable>(); }
  const kernels::DotSlot* d_dot_slots() const { return dot_slots_.get<kernels::DotSlot>(); }
  const kernels::ConcatSlot* d_concat_slots() const {
    return concat_slots_.get<kernels::ConcatSlot>();
  }
  // Layer shapes with device weight pointers; the caller fills in_ld / out_ld.
  const std::vector<MlpLayerShape>& bottom() const { return bottom_; }
  const std::vector<MlpLayerShape>& top() const { return top_; }
  // dcn: per cross layer its GEMMs, [V (zero bias), U + b] at low rank or [W + b].
  const std::vector<std::vector<MlpLayerShape>>& dcn() const { return dcn_; }
  // Bytes of the tables' rows, in device memory or (host_tables) in mapped host memory.
  size_t table_bytes() const { return table_bytes_; }
  bool host_tables() const { return host_tables_; }

 private:
  DeviceModel() = default;

  std::vector<DeviceBuffer> tables_;
  std::vector<MappedHostBuffer> host_rows_;
  bool host_tables_ = false;
  DeviceBuffer tables_desc_;
  DeviceBuffer dot_slots_;
  DeviceBuffer concat_slots_;
  std::vector<DeviceBuffer> weights_;
  std::vector<MlpLayerShape> bottom_;
  std::vector<MlpLayerShape> top_;
  std::vector<std::vector<MlpLayerShape>> dcn_;
  size_t table_bytes_ = 0;
};

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_ENGINE_CUDA_DEVICE_MODEL_H_

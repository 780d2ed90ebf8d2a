#include "engine/cuda/dcn_stage.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/status_macros.h"
#include "kernels/cross.h"

namespace fuserank::engine::cuda {
namespace {

size_t Floats(uint32_t rows, int ld) { return sizeof(float) * rows * static_cast<size_t>(ld); }

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<MlpPlan>>> CreateDcnPlans(
    cublasLtHandle_t handle, const GpuLayout& layout,
    const std::vector<std::vector<MlpLayerShape>>& layers, const std::vector<uint32_t>& buckets,
    bool allow_tf32, size_t workspace_bytes, bool autotune) {
  std::vector<std::unique_ptr<MlpPlan>> plans;
  for (const std::vector<MlpLayerShape>& gemms : layers) {
    std::vector<MlpLayerShape> shapes = gemms;
    SetPitches(&shapes, layout.h_ld, layout.dcn_t_ld, layout.h_ld);
    ASSIGN_OR_RETURN(
        std::unique_ptr<MlpPlan> plan,
        MlpPlan::Create(handle, std::move(shapes), buckets, allow_tf32, workspace_bytes, autotune));
    plans.push_back(std::move(plan));
  }
  return plans;
}

absl::StatusOr<std::unique_ptr<DcnStage>> DcnStage::Create(const GpuLayout& layout,
                                                           const std::vector<const MlpPlan*>& plans,
                                                           uint32_t max_rows, const float* d_x0) {
  std::unique_ptr<DcnStage> stage(new DcnStage());
  stage->plans_ = plans;
  stage->d_x0_ = d_x0;
  stage->ld_ = layout.h_ld;
  stage->width_ = layout.h_width;
  ASSIGN_OR_RETURN(stage->xl_, DeviceBuffer::Allocate(Floats(max_rows, layout.h_ld), "dcn x_l"));
  ASSIGN_OR_RETURN(stage->y_, DeviceBuffer::Allocate(Floats(max_rows, layout.h_ld), "dcn y"));
  if (layout.dcn_rank > 0) {
    ASSIGN_OR_RETURN(stage->t_,
                     DeviceBuffer::Allocate(Floats(max_rows, layout.dcn_t_ld), "dcn V x_l"));
  }
  for (size_t l = 0; l < plans.size(); ++l) {
    const float* in = l == 0 ? d_x0 : stage->xl_.get<float>();
    float* y = stage->y_.get<float>();
    if (plans[l]->num_layers() == 2) {
      float* t = stage->t_.get<float>();
      stage->io_.push_back({{in, t}, {t, y}});
    } else {
      stage->io_.push_back({{in, y}});
    }
  }
  return stage;
}

absl::Status DcnStage::Enqueue(cublasLtHandle_t handle, int bucket_index, uint32_t bucket,
                               void* d_ws, size_t ws_bytes, cudaStream_t stream,
                               int* launches) const {
  for (size_t l = 0; l < plans_.size(); ++l) {
    RETURN_IF_ERROR(
        plans_[l]->Enqueue(handle, bucket_index, io_[l], d_ws, ws_bytes, stream, launches));
    kernels::CrossArgs a;
    a.d_x0 = d_x0_;
    a.d_y = y_.get<float>();
    a.d_xl = l == 0 ? d_x0_ : xl_.get<float>();
    a.d_out = xl_.get<float>();
    a.ld = ld_;
    a.width = width_;
    a.rows = bucket;
    RETURN_IF_CUDA_ERROR(kernels::LaunchCrossResidual(a, stream),
                         absl::StrCat("dcn layer ", l, " residual"));
    ++*launches;
  }
  return absl::OkStatus();
}

}  // namespace fuserank::engine::cuda

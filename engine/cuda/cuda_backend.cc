#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_probe.h"
#include "engine/cuda/cuda_status.h"
#include "engine/device_fault.h"
#include "engine/status_macros.h"
#include "kernels/interaction.h"
#include "kernels/layout_math.h"
#include "kernels/lookup.h"

namespace fuserank::engine::cuda {
namespace {

constexpr size_t kDefaultDotSharedBytes = 48 * 1024;

// The dot kernel stages a warp's vectors in shared memory: 48 KiB per block by default,
// and up to the device's opt-in limit (227 KiB on Hopper) for wider models. Returns the
// block budget the kernel must be launched with (0 when the model has no dot).
absl::StatusOr<size_t> DotSharedBudget(const ModelSpec& spec, const GpuLayout& g, int gpu) {
  if (g.interaction != Interaction::kDot) return size_t{0};
  const int n = spec.dot_vectors();
  const size_t per_warp = kernels::DotSharedBytesPerWarp(n, g.dim);
  if (per_warp <= kDefaultDotSharedBytes) return kDefaultDotSharedBytes;
  int optin = 0;
  RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu),
                       "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (per_warp > static_cast<size_t>(optin)) {
    return absl::UnimplementedError(absl::StrCat(
        "dot interaction of ", n, " vectors of width ", g.dim, " needs ", per_warp,
        " bytes of shared memory per warp, more than this GPU's ", optin, " per block"));
  }
  RETURN_IF_CUDA_ERROR(kernels::AllowDotSharedBytes(static_cast<size_t>(optin)),
                       "cudaFuncSetAttribute(dot interaction, MaxDynamicSharedMemorySize)");
  return static_cast<size_t>(optin);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(std::shared_ptr<const Model> model,
                                                                 const BackendOptions& options,
                                                                 const CudaOptions& cuda_options) {
  if (model == nullptr) return absl::InvalidArgumentError("CudaBackend: no model");
  if (options.workers < 1 || options.max_batch_candidates < 1) {
    return absl::InvalidArgumentError("CudaBackend: workers and max_batch_candidates must be >= 1");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  ASSIGN_OR_RETURN(b->description_, ProbeCudaDevice(options.gpu));
  b->model_ = std::move(model);
  const Model& m = *b->model_;
  ASSIGN_OR_RETURN(GpuLayout layout, ComputeGpuLayout(m));
  ASSIGN_OR_RETURN(const size_t dot_shared_bytes, DotSharedBudget(m.spec(), layout, options.gpu));
  if (options.host_tables) {
    if (cuda_options.reorder_ids) {
      return absl::UnimplementedError(
          "cache.placement: host does not run with the id reorder (FUSERANK_CUDA_REORDER_IDS)");
    }
    if (layout.lookup.size() > static_cast<size_t>(kernels::kMaxHotCountedTables)) {
      return absl::UnimplementedError(absl::StrCat(
          "cache.placement: host serves models of at most ", kernels::kMaxHotCountedTables,
          " tables; this one has ", layout.lookup.size()));
    }
  }
  ASSIGN_OR_RETURN(b->device_model_, DeviceModel::Upload(m, layout, options.host_tables));

  BackendShared& sh = b->shared_;
  sh.gpu = options.gpu;
  sh.cuda_graphs = options.cuda_graphs;
  sh.blocking_wait = options.cuda_blocking_wait;
  sh.reorder_ids = cuda_options.reorder_ids;
  sh.graph_stage_events = cuda_options.graph_stage_events;
  sh.stage_sample_period = std::max(0, cuda_options.stage_sample_period);
  sh.prefetch_min_ids = cuda_options.prefetch_min_ids;
  sh.dot_shared_bytes = dot_shared_bytes;
  sh.max_bucket = kernels::CandidateBucket(static_cast<uint32_t>(options.max_batch_candidates));
  for (uint32_t n = kernels::kMinCandidateBucket; n <= sh.max_bucket; n *= 2)
    sh.buckets.push_back(n);
  sh.workspace_bytes = cuda_options.workspace_bytes;
  sh.pack_info = MakePackInfo(m);
  if (options.hot_rows != nullptr && &options.hot_rows->model() == &m) {
    sh.hot_rows = options.hot_rows;
  }
  if (options.host_tables && sh.hot_rows != nullptr && !layout.lookup.empty()) {
    ASSIGN_OR_RETURN(b->hot_cache_, DeviceHotCache::Create(m, layout, sh.hot_rows, options.gpu,
                                                           cuda_options.hot_poll));
    sh.hot_cache = b->hot_cache_.get();
    sh.hot_count_interval_ns = absl::ToInt64Nanoseconds(cuda_options.hot_count_interval);
  }

  // Algorithms are chosen once here, with a handle of the same device as the workers'.
  ASSIGN_OR_RETURN(LtHandle lt, CreateLtHandle());
  if (!b->device_model_->bottom().empty()) {
    std::vector<MlpLayerShape> shapes = b->device_model_->bottom();
    SetPitches(&shapes, layout.x_ld, layout.hidden_ld, layout.h_ld);
    ASSIGN_OR_RETURN(b->bottom_,
                     MlpPlan::Create(lt.get(), std::move(shapes), sh.buckets, options.allow_tf32,
                                     sh.workspace_bytes, cuda_options.mlp_autotune));
  }
  ASSIGN_OR_RETURN(
      b->dcn_, CreateDcnPlans(lt.get(), layout, b->device_model_->dcn(), sh.buckets,
                              options.allow_tf32, sh.workspace_bytes, cuda_options.mlp_autotune));
  for (const std::unique_ptr<MlpPlan>& plan : b->dcn_) sh.dcn.push_back(plan.get());
  std::vector<MlpLayerShape> top = b->device_model_->top();
  SetPitches(&top, layout.h_ld, layout.hidden_ld, /*last_out_ld=*/1);
  ASSIGN_OR_RETURN(b->top_,
                   MlpPlan::Create(lt.get(), std::move(top), sh.buckets, options.allow_tf32,
                                   sh.workspace_bytes, cuda_options.mlp_autotune));
  sh.layout = std::move(layout);
  sh.model = b->device_model_.get();
  sh.bottom = b->bottom_.get();
  sh.top = b->top_.get();
  for (int w = 0; w < options.workers; ++w) {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaWorker> worker, CudaWorker::Create(&sh));
    b->workers_.push_back(std::move(worker));
  }
  return b;
}

CudaBackend::~CudaBackend() {
  // Device memory is freed on this thread: make the backend's GPU current first.
  cudaSetDevice(shared_.gpu);
  workers_.clear();
}

void CudaBackend::FlushLookupCounts() {
  if (failed_.load(std::memory_order_acquire)) return;
  cudaSetDevice(shared_.gpu);
  for (const std::unique_ptr<CudaWorker>& worker : workers_) worker->FlushHotCounts();
}

std::vector<std::pair<std::string, const MlpPlan*>> CudaBackend::mlp_plans() const {
  std::vector<std::pair<std::string, const MlpPlan*>> plans;
  if (bottom_ != nullptr) plans.emplace_back("bottom", bottom_.get());
  for (size_t l = 0; l < dcn_.size(); ++l)
    plans.emplace_back(absl::StrCat("dcn ", l), dcn_[l].get());
  plans.emplace_back("top", top_.get());
  return plans;
}

std::string CudaBackend::device() const { return absl::StrCat("cuda:", shared_.gpu); }

absl::Status CudaBackend::Run(int worker, const Batch& batch, BatchResult* result) {
  if (worker < 0 || worker >= num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("CudaBackend: no worker ", worker));
  }
  if (batch.model.get() != model_.get()) {
    return absl::InvalidArgumentError("CudaBackend: the batch is for another model");
  }
  if (failed_.load(std::memory_order_acquire)) return health();
  absl::Status status = workers_[worker]->Run(batch, result);
  if (status.ok()) return status;
  if (IsDeviceFault(status)) return Fail(status);
  // A call that reports its own error (cuBLASLt, say) may have met a fault that the
  // runtime holds: a context-fatal error is returned by every call after it.
  const cudaError_t held = cudaPeekAtLastError();
  if (IsContextFatalCudaError(static_cast<int>(held))) {
    return Fail(MarkDeviceFault(absl::InternalError(absl::StrCat(
                                    status.message(), "; the runtime reports ",
                                    cudaGetErrorName(held), " (", cudaGetErrorString(held), ")")),
                                static_cast<int>(held)));
  }
  return status;
}

absl::Status CudaBackend::Fail(const absl::Status& fault) {
  absl::MutexLock lock(&failure_mu_);
  if (!failed_.load(std::memory_order_relaxed)) {
    failure_ = DeviceFailedStatus(device(), fault);
    failed_.store(true, std::memory_order_release);
  }
  return failure_;
}

absl::Status CudaBackend::health() const {
  if (!failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&failure_mu_);
  return failure_;
}

}  // namespace fuserank::engine::cuda

#include "server/guarded_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {

GuardedBackend::GuardedBackend(std::unique_ptr<engine::Backend> primary,
                               std::shared_ptr<const engine::Model> model,
                               DeviceFailurePolicy policy)
    : primary_(std::move(primary)),
      model_(std::move(model)),
      policy_(std::move(policy)),
      workers_(primary_->num_workers()),
      primary_device_(primary_->device()),
      active_(primary_.get()) {}

std::string GuardedBackend::device() const {
  return active_.load(std::memory_order_acquire)->device();
}

absl::Status GuardedBackend::Run(int worker, const engine::Batch& batch,
                                 engine::BatchResult* result) {
  engine::Backend* active = active_.load(std::memory_order_acquire);
  if (active == primary_.get() && reacted_.load(std::memory_order_acquire)) {
    active = active_.load(std::memory_order_acquire);  // switched meanwhile?
    if (active == primary_.get()) return health();     // failed
  }
  if (active != primary_.get()) return active->Run(worker, batch, result);
  const absl::Status status = primary_->Run(worker, batch, result);
  if (status.ok()) return status;
  const absl::Status primary_health = primary_->health();
  if (primary_health.ok()) return status;  // this batch failed; the device did not
  React(primary_health);
  active = active_.load(std::memory_order_acquire);
  if (active == primary_.get()) return health();
  result->Clear();  // whatever the failed run left
  return active->Run(worker, batch, result);
}

absl::Status GuardedBackend::health() const {
  if (!reacted_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return failure_;
}

std::string GuardedBackend::Retire() {
  absl::MutexLock lock(&mu_);  // after a React that holds it, before one that waits
  retired_ = true;
  return device();
}

void GuardedBackend::React(const absl::Status& primary_health) {
  {
    absl::MutexLock lock(&mu_);
    if (reacted_.load(std::memory_order_relaxed)) return;
    const std::string version = model_->spec().version;
    if (policy_.metrics != nullptr)
      policy_.metrics->AddBackendFailure(policy_.model, primary_device_);
    if (policy_.on_failure == OnDeviceFailure::kCpu) {
      engine::BackendOptions options = policy_.cpu_options;
      options.workers = workers_;
      fallback_ = engine::CreateCpuBackend(model_, options);
      spdlog::error(
          "model '{}' version '{}': {}; engine.on_device_failure is cpu: the batch is scored "
          "again and the model goes on serving on the CPU engine ({} workers)",
          policy_.model, version, std::string(primary_health.message()), workers_);
      if (policy_.metrics != nullptr && !retired_) {
        policy_.metrics->RemoveModelInfo(policy_.model, version, primary_device_);
        policy_.metrics->SetModelInfo(policy_.model, version, fallback_->device());
      }
      failure_ = absl::OkStatus();
      active_.store(fallback_.get(), std::memory_order_release);
    } else {
      failure_ = absl::UnavailableError(absl::StrCat("model '", policy_.model, "' version '",
                                                     version, "': ", primary_health.message()));
      spdlog::error(
          "model '{}' version '{}': {}; engine.on_device_failure is fail: its requests get "
          "UNAVAILABLE and health reports NOT_SERVING",
          policy_.model, version, std::string(primary_health.message()));
    }
    reacted_.store(true, std::memory_order_release);
  }
  if (policy_.on_failed) policy_.on_failed();
}

}  // namespace fuserank::server

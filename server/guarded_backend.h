// A served version's backend as the batcher sees it: the backend the loader built, and
// what the server does once that backend's device has failed (engine/device_fault.h),
// as engine.on_device_failure says. One code path for Rank and ModelInfer: both reach
// the backend only through the version's batcher.
//   fail: the batch that met the fault and every later one get UNAVAILABLE naming the
//         model, the device and the first error; health() says the same, so the server
//         reports NOT_SERVING.
//   cpu:  a CPU backend is built from the same Model (its host weights) once, the batch
//         that met the fault is scored again on it (a validated batch reads only host
//         memory there), and every later batch runs on it; health() stays OK.
// Either way the failure is logged once at error level, counted in
// fuserank_backend_failures_total{model, device}, and `on_failed` runs once; with cpu the
// version's fuserank_model_info series moves to device "cpu" unless it was retired.
// Thread-safe in the Backend sense.
#ifndef FUSERANK_SERVER_GUARDED_BACKEND_H_
#define FUSERANK_SERVER_GUARDED_BACKEND_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "server/config.h"
#include "server/metrics.h"

namespace fuserank::server {

struct DeviceFailurePolicy {
  OnDeviceFailure on_failure = OnDeviceFailure::kFail;  // engine.on_device_failure
  std::string model;           // the served model's name, for the log and the metric
  Metrics* metrics = nullptr;  // may be null
  // kCpu: the CPU backend's options (its worker count is the failed backend's).
  engine::BackendOptions cpu_options;
  // Runs once after the reaction (the switch, or the failure recorded), on the worker
  // thread that met the fault; may be null. It must not call back into this backend's
  // Run (health() is fine).
  std::function<void()> on_failed;
};

class GuardedBackend final : public engine::Backend {
 public:
  GuardedBackend(std::unique_ptr<engine::Backend> primary,
                 std::shared_ptr<const engine::Model> model, DeviceFailurePolicy policy);

  // The device scoring now: the primary's, "cpu" once switched.
  std::string device() const override;
  int num_workers() const override { return workers_; }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override;
  // OK unless the device failed and engine.on_device_failure is fail: then UNAVAILABLE,
  // what every batch gets.
  absl::Status health() const override;
  // The primary's: the warm-up runs before any batch could fail it.
  std::vector<std::vector<int>> WarmupBatches(int max_batch_candidates,
                                              int max_request_candidates) const override {
    return primary_->WarmupBatches(max_batch_candidates, max_request_candidates);
  }
  // The backend scoring now (the CPU fallback counts as it goes).
  void FlushLookupCounts() override {
    active_.load(std::memory_order_acquire)->FlushLookupCounts();
  }

  // True once the device failed (either policy).
  bool device_failed() const { return reacted_.load(std::memory_order_acquire); }

  // The version no longer serves (a reload swapped it out; requests may still finish on
  // it): from now on a device failure changes no fuserank_model_info series, which are the
  // serving version's and the reload's to set and remove. Returns the device of the series
  // this version has (device() now, which no failure changes in the metrics after this).
  std::string Retire();

 private:
  // The reaction to the primary's failure `health` (once; later callers wait for it).
  void React(const absl::Status& health);

  const std::unique_ptr<engine::Backend> primary_;
  const std::shared_ptr<const engine::Model> model_;
  const DeviceFailurePolicy policy_;
  const int workers_;
  const std::string primary_device_;
  std::atomic<engine::Backend*> active_;  // primary_ until switched to fallback_
  std::atomic<bool> reacted_{false};      // set after failure_ / fallback_
  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);                       // kFail: what every batch gets
  std::unique_ptr<engine::Backend> fallback_ ABSL_GUARDED_BY(mu_);  // kCpu
  bool retired_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_GUARDED_BACKEND_H_

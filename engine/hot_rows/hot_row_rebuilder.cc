#include "engine/hot_rows/hot_row_rebuilder.h"

#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace fuserank::engine {

PeriodicRebuilder::PeriodicRebuilder(HotRowManager* manager, absl::Duration interval,
                                     Callback on_rebuild)
    : manager_(manager), interval_(interval), on_rebuild_(std::move(on_rebuild)) {
  ABSL_RAW_CHECK(interval_ > absl::ZeroDuration(), "rebuild interval must be positive");
  absl::MutexLock lock(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
}

PeriodicRebuilder::~PeriodicRebuilder() { Stop(); }

void PeriodicRebuilder::Stop() {
  absl::MutexLock lock(&join_mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void PeriodicRebuilder::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    absl::StatusOr<HotRowsStatus> status = manager_->Rebuild({});
    rebuilds_.fetch_add(1, std::memory_order_relaxed);
    if (on_rebuild_) on_rebuild_(status);
  }
}

}  // namespace fuserank::engine

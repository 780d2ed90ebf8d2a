// PeriodicRebuilder: for cache.policy: frequency, calls HotRowManager::Rebuild (all
// tables) every cache.rebuild_interval_seconds on its own thread. Stop() (or the
// destructor) wakes the thread at once and joins it; a rebuild in progress finishes first.
// Thread-safe; the manager must outlive the rebuilder.
#ifndef FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_REBUILDER_H_
#define FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_REBUILDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/hot_rows/hot_row_manager.h"

namespace fuserank::engine {

class PeriodicRebuilder {
 public:
  // Called on the rebuilder's thread after each rebuild (e.g. to log or export metrics).
  using Callback = std::function<void(const absl::StatusOr<HotRowsStatus>&)>;

  // Starts the thread; the first rebuild happens one `interval` from now.
  // REQUIRES: interval > 0.
  PeriodicRebuilder(HotRowManager* manager, absl::Duration interval, Callback on_rebuild = {});
  ~PeriodicRebuilder();  // Stop()

  // Idempotent; returns once the thread has exited.
  void Stop();
  int64_t rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }

  PeriodicRebuilder(const PeriodicRebuilder&) = delete;
  PeriodicRebuilder& operator=(const PeriodicRebuilder&) = delete;

 private:
  void Loop();

  HotRowManager* const manager_;
  const absl::Duration interval_;
  const Callback on_rebuild_;
  std::atomic<int64_t> rebuilds_{0};
  absl::Notification stop_;
  absl::Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_HOT_ROWS_HOT_ROW_REBUILDER_H_

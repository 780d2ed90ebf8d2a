// The clock a Batcher reads and sleeps on: the real steady clock in the server; tests
// inject one they advance by hand, so timing tests assert exact durations instead of
// sleeping against wall-clock thresholds. Implementations are thread-safe.
#ifndef FUSERANK_ENGINE_TIME_SOURCE_H_
#define FUSERANK_ENGINE_TIME_SOURCE_H_

#include <chrono>

#include "absl/synchronization/mutex.h"

namespace fuserank::engine {

class TimeSource {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~TimeSource() = default;
  virtual time_point Now() const = 0;
  // Waits on `mu` until `condition` holds or Now() reaches `until`, as
  // absl::Mutex::AwaitWithTimeout does; it may also return earlier (callers re-check).
  // REQUIRES: `mu` is held; it is released while waiting and held again on return.
  virtual void AwaitUntil(absl::Mutex* mu, const absl::Condition& condition, time_point until) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// std::chrono::steady_clock, and real waits. Lives for the whole process.
TimeSource* SteadyTimeSource();

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_TIME_SOURCE_H_

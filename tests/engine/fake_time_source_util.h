// A TimeSource (engine/time_source.h) that stands still until the test advances it, for
// the Batcher's timing tests: queue times, max_batch_wait_us, max_queue_delay_ms and the
// predicted wait come out exact, with no sleep and no wall-clock threshold. Thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_FAKE_TIME_SOURCE_UTIL_H_
#define FUSERANK_TESTS_ENGINE_FAKE_TIME_SOURCE_UTIL_H_

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/time_source.h"

namespace fuserank::engine::test {

class FakeTimeSource final : public TimeSource {
 public:
  // Starts an hour past the steady clock's epoch, so that "a millisecond ago" exists.
  FakeTimeSource() = default;

  time_point Now() const override;
  // Returns at once when `condition` holds or Now() has reached `until`; otherwise waits
  // on `mu` a little real time (1 ms) for `condition` and returns, so that its caller
  // re-checks the fake time soon after an Advance(). Real time decides nothing.
  void AwaitUntil(absl::Mutex* mu, const absl::Condition& condition, time_point until) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;

  void Advance(std::chrono::steady_clock::duration by);

 private:
  mutable absl::Mutex mu_;
  time_point now_ ABSL_GUARDED_BY(mu_) = time_point() + std::chrono::hours(1);
};

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_FAKE_TIME_SOURCE_UTIL_H_

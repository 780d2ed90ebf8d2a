#include "tests/engine/fake_time_source_util.h"

#include "absl/time/time.h"

namespace fuserank::engine::test {

TimeSource::time_point FakeTimeSource::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeTimeSource::AwaitUntil(absl::Mutex* mu, const absl::Condition& condition,
                                time_point until) const {
  if (Now() >= until) return;
  mu->AwaitWithTimeout(condition, absl::Milliseconds(1));
}

void FakeTimeSource::Advance(std::chrono::steady_clock::duration by) {
  absl::MutexLock lock(&mu_);
  now_ += by;
}

}  // namespace fuserank::engine::test

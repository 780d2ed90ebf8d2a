#include "engine/time_source.h"

#include "absl/time/time.h"

namespace fuserank::engine {
namespace {

class SteadyClock final : public TimeSource {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
  void AwaitUntil(absl::Mutex* mu, const absl::Condition& condition, time_point until) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    mu->AwaitWithTimeout(condition, absl::FromChrono(until - Now()));
  }
};

}  // namespace

TimeSource* SteadyTimeSource() {
  static SteadyClock* const clock = new SteadyClock();
  return clock;
}

}  // namespace fuserank::engine

// The open-loop rate over time: one rate, or a schedule of phases (a spike and the
// recovery after it in one run), parsed from --schedule and checked before a run.
// RateSchedule is immutable after construction and safe to read from any thread.
#ifndef FUSERANK_BENCH_LOADGEN_RATE_SCHEDULE_H_
#define FUSERANK_BENCH_LOADGEN_RATE_SCHEDULE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fuserank::bench {

// One phase of an open-loop schedule: Poisson arrivals at `rate` for `duration_s`.
struct RatePhase {
  double rate = 0;
  double duration_s = 0;
};

// "RATE:SECONDS,RATE:SECONDS,..." into phases, each checked as ValidateSchedule does; the
// error names the entry (1-based) and its text. Empty text: no phase.
absl::StatusOr<std::vector<RatePhase>> ParseSchedule(absl::string_view text);

// OK when every phase has a finite rate > 0 and a finite duration > 0; else the first
// offending phase, named by its position.
absl::Status ValidateSchedule(absl::Span<const RatePhase> phases);

// The sum of the phases' durations.
double ScheduleSeconds(absl::Span<const RatePhase> phases);

// Where the rate changes, in the run's clock (steady_clock nanoseconds).
class RateSchedule {
 public:
  static constexpr int64_t kNever = INT64_MAX;

  // `rate` alone when `phases` is empty; otherwise the phases in turn from
  // `window_start_ns` (and the first phase's rate before it, the warm-up).
  // REQUIRES: ValidateSchedule(phases).ok(); rate > 0 when phases is empty.
  RateSchedule(double rate, std::vector<RatePhase> phases, int64_t window_start_ns);

  // The rate at `t_ns` and the time it next changes (kNever: it does not).
  std::pair<double, int64_t> PhaseAt(int64_t t_ns) const;

 private:
  double rate_;
  std::vector<RatePhase> phases_;
  int64_t window_start_ns_;
  std::vector<int64_t> phase_end_ns_;  // phase i ends (exclusive) at phase_end_ns_[i]
};

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_RATE_SCHEDULE_H_

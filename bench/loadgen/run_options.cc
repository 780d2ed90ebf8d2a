#include "bench/loadgen/run_options.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/loadgen/window_buckets.h"

namespace fuserank::bench {
namespace {

// Printed whole: StrCat would write 1e+06.
constexpr int64_t kMaxRunWholeSeconds = static_cast<int64_t>(kMaxRunSeconds);

}  // namespace

absl::StatusOr<RunPlan> PlanRun(const RunOptions& options) {
  if (absl::Status status = ValidateSchedule(options.schedule); !status.ok()) return status;
  if (!std::isfinite(options.rate) || options.rate < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rate must be finite and >= 0, not ", options.rate));
  }
  if ((options.concurrency > 0) == (options.rate > 0 || !options.schedule.empty())) {
    return absl::InvalidArgumentError(
        "give exactly one of --concurrency and --rate (or --schedule)");
  }
  if (options.channels < 1 || options.threads < 1 || options.timeout_ms < 1 ||
      options.max_outstanding < 1) {
    return absl::InvalidArgumentError(
        "--channels, --threads, --timeout_ms and --max_outstanding must be >= 1");
  }
  RunPlan plan;
  const bool scheduled = !options.schedule.empty();
  plan.window_s = scheduled ? ScheduleSeconds(options.schedule) : options.duration_s;
  // Written so that NaN fails too.
  if (!(plan.window_s > 0 && plan.window_s <= kMaxRunSeconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat(scheduled ? "the sum of --schedule's durations" : "--duration",
                     " must be > 0 and at most ", kMaxRunWholeSeconds, " s, not ", plan.window_s));
  }
  if (!(options.warmup_s >= 0 && options.warmup_s <= kMaxRunSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup must be >= 0 and at most ", kMaxRunWholeSeconds, " s, not ", options.warmup_s));
  }
  absl::StatusOr<int64_t> bucket_ns = BucketNanos(options.bucket_s, plan.window_s);
  if (!bucket_ns.ok()) return bucket_ns.status();
  plan.bucket_ns = *bucket_ns;
  return plan;
}

}  // namespace fuserank::bench

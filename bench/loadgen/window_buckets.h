// The measured window cut into buckets of equal length (the last may be shorter), so that
// what happens right after a phase change of the rate is seen apart from the whole window.
// WindowGrid is immutable and safe to read from any thread; WindowBucket is plain data:
// each thread fills its own and they are merged after the run.
#ifndef FUSERANK_BENCH_LOADGEN_WINDOW_BUCKETS_H_
#define FUSERANK_BENCH_LOADGEN_WINDOW_BUCKETS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/loadgen/latency_histogram.h"
#include "bench/loadgen/rate_schedule.h"

namespace fuserank::bench {

// One bucket of the window. Calls belong to the bucket of their (scheduled) start, except
// completed_ok, which counts OK answers that arrived inside the bucket whenever sent.
struct WindowBucket {
  double start_s = 0;  // from the window's start
  double rate = 0;     // open loop: the scheduled rate at the bucket's start
  LatencyHistogram latency;
  int64_t ok = 0;
  int64_t errors = 0;
  int64_t completed_ok = 0;
  int64_t delayed_sends = 0;
  int64_t max_send_lag_ns = 0;
};

// Each bucket holds a latency histogram (~115 KB) per thread and one for the sender, all
// allocated before the run: more buckets than this is a mistyped --bucket.
inline constexpr int64_t kMaxWindowBuckets = 1000;

// The length in nanoseconds of a bucket of `bucket_s` seconds in a window of `window_s`
// (0: no buckets); a bucket longer than the window is the window. InvalidArgument naming
// --bucket and --duration when bucket_s is negative, not finite, rounds to 0 ns or makes
// more than kMaxWindowBuckets buckets.
// REQUIRES: window_s finite and > 0.
absl::StatusOr<int64_t> BucketNanos(double bucket_s, double window_s);

class WindowGrid {
 public:
  // REQUIRES: bucket_ns >= 0 (0: no buckets); window_start_ns <= window_end_ns.
  WindowGrid(int64_t window_start_ns, int64_t window_end_ns, int64_t bucket_ns);

  int size() const { return size_; }
  // The bucket that holds `t_ns`, or -1 outside the window or with no buckets.
  int Of(int64_t t_ns) const;
  // size() empty buckets with their start and, open loop (`schedule` not null), the rate
  // at their start.
  std::vector<WindowBucket> NewBuckets(const RateSchedule* schedule) const;

 private:
  int64_t window_start_ns_;
  int64_t window_end_ns_;
  int64_t bucket_ns_;
  int size_;
};

// Adds the calls recorded in `from` (latency, ok, errors, completed_ok) to `into`; the
// send fields are the sender's own and stay as they are.
void MergeCalls(const WindowBucket& from, WindowBucket* into);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_WINDOW_BUCKETS_H_

// What fuserank-bench is asked to run (RunOptions, defaults in place) and the one check of
// it, whose errors name the flag. Plain data; PlanRun is a pure function.
#ifndef FUSERANK_BENCH_LOADGEN_RUN_OPTIONS_H_
#define FUSERANK_BENCH_LOADGEN_RUN_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/loadgen/rate_schedule.h"

namespace fuserank::bench {

// The longest warm-up, and the longest measured window, a run takes: every time of the
// run stays well inside int64 nanoseconds.
inline constexpr double kMaxRunSeconds = 1e6;

struct RunOptions {
  std::string target;   // host:port
  int channels = 1;     // distinct HTTP/2 connections
  int threads = 1;      // completion queues, each polled by one thread
  int concurrency = 0;  // > 0: closed loop with this many calls in flight
  double rate = 0;      // > 0: open loop at this many requests per second
  // Open loop, not empty: the measured window is these phases in turn (duration_s is
  // ignored; the window is their sum) and the warm-up runs at the first phase's rate.
  std::vector<RatePhase> schedule;
  // > 0: also report the window in buckets of this length (at most kMaxWindowBuckets).
  double bucket_s = 0;
  double duration_s = 10;         // measured window
  double warmup_s = 2;            // run but not measured, before the window
  int timeout_ms = 5000;          // deadline of every call
  int connect_timeout_ms = 5000;  // the target must accept a connection within this
  int max_outstanding = 4096;     // open loop: sends wait (late, still timed) above this
  bool validate = true;           // parse responses and check the item count
  bool progress = false;          // a progress line on stderr every second
  uint64_t seed = 1;              // arrival times
};

// What a run of valid options measures.
struct RunPlan {
  double window_s = 0;    // the measured window
  int64_t bucket_ns = 0;  // 0: no buckets
};

// The plan of `options`, or InvalidArgument naming the first flag out of range: exactly
// one of concurrency and rate (or a schedule) > 0, every phase valid (ValidateSchedule),
// numbers finite, window in (0, kMaxRunSeconds], bucket valid (BucketNanos).
absl::StatusOr<RunPlan> PlanRun(const RunOptions& options);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_RUN_OPTIONS_H_

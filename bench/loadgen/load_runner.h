// Drives a fuserank.v1.Ranker server with pre-serialized requests over gRPC's async
// generic API: closed loop (a fixed number of calls in flight) or open loop (Poisson
// arrivals at a fixed rate; latency counts from the scheduled send time, so a slow server
// cannot hide queueing by slowing the sender: no coordinated omission).
// Open loop may follow a schedule of rates (a spike and the recovery after it in one run)
// and report the window in buckets, so that what happens right after a phase change is
// seen by the same connection and the same sender.
// RunLoad blocks until the run ends; every call has a deadline, so it returns within
// warmup + duration + timeout (plus connection setup).
#ifndef FUSERANK_BENCH_LOADGEN_LOAD_RUNNER_H_
#define FUSERANK_BENCH_LOADGEN_LOAD_RUNNER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/loadgen/latency_histogram.h"
#include "bench/loadgen/request_pool.h"

namespace fuserank::bench {

// One phase of an open-loop schedule: Poisson arrivals at `rate` for `duration_s`.
struct RatePhase {
  double rate = 0;
  double duration_s = 0;
};

struct RunOptions {
  std::string target;   // host:port
  int channels = 1;     // distinct HTTP/2 connections
  int threads = 1;      // completion queues, each polled by one thread
  int concurrency = 0;  // > 0: closed loop with this many calls in flight
  double rate = 0;      // > 0: open loop at this many requests per second
  // Open loop, not empty: the measured window is these phases in turn (duration_s is
  // ignored; the window is their sum) and the warm-up runs at the first phase's rate.
  std::vector<RatePhase> schedule;
  double bucket_s = 0;            // > 0: also report the window in buckets of this length
  double duration_s = 10;         // measured window
  double warmup_s = 2;            // run but not measured, before the window
  int timeout_ms = 5000;          // deadline of every call
  int connect_timeout_ms = 5000;  // the target must accept a connection within this
  int max_outstanding = 4096;     // open loop: sends wait (late, still timed) above this
  bool validate = true;           // parse responses and check the item count
  bool progress = false;          // a progress line on stderr every second
  uint64_t seed = 1;              // arrival times
};

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

struct RunResult {
  LatencyHistogram latency;  // nanoseconds, OK calls that started inside the window
  LatencyHistogram refused;  // the same for calls refused with RESOURCE_EXHAUSTED
  int64_t ok = 0;            // calls started inside the window that returned OK
  int64_t errors = 0;        // calls started inside the window that failed
  // OK answers that arrived inside the window, whenever their call was sent: the
  // throughput (`ok` also counts calls sent in the window and answered after it).
  int64_t completed_ok = 0;
  int64_t drain_ns = 0;  // from the window's end to the last answer of a call sent in it
  std::map<std::string, int64_t> errors_by_code;  // gRPC code name, or BAD_RESPONSE
  double window_s = 0;
  int64_t delayed_sends = 0;          // open loop: sends held back by max_outstanding
  int64_t max_send_lag_ns = 0;        // open loop: latest send after its scheduled time
  std::vector<WindowBucket> buckets;  // RunOptions::bucket_s > 0
};

// The name of a gRPC status code ("OK", "UNAVAILABLE", ...).
std::string StatusCodeName(int code);

// REQUIRES: exactly one of options.concurrency and options.rate (or a schedule) is > 0;
// pool not empty.
absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const RequestPool& pool);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_LOAD_RUNNER_H_

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
#include "bench/loadgen/run_options.h"
#include "bench/loadgen/window_buckets.h"

namespace fuserank::bench {

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

// Returns PlanRun's error (InvalidArgument naming the flag) before connecting, as it does
// for an empty pool; UNAVAILABLE when the target does not connect.
absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const RequestPool& pool);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_LOAD_RUNNER_H_

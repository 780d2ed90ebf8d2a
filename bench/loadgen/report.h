// Turns a finished run into the human summary and the one-line JSON object that
// fuserank-bench prints last (the contract with bench/run_cpu_bench.sh and bench/plot.py).
// Pure functions.
#ifndef FUSERANK_BENCH_LOADGEN_REPORT_H_
#define FUSERANK_BENCH_LOADGEN_REPORT_H_

#include <cstdint>
#include <string>

#include "bench/loadgen/load_runner.h"
#include "bench/loadgen/request_pool.h"

namespace fuserank::bench {

struct BenchReport {
  std::string target;
  std::string model;  // the spec's name
  RunOptions run;
  RequestOptions request;
  int requests_pool = 0;
  double request_bytes = 0;  // mean serialized request size
  RunResult result;
};

// One line, no newline: {"qps":..., "p50_ms":..., ...}. Keys are stable. A bucket's
// p99_ms is null under 1,000 calls (too few for one: see ReportText).
std::string ReportJson(const BenchReport& report);
// A few lines for people, with call counts; "-" for a p99 or p99.9 of fewer than 1,000 or
// 10,000 calls (the top line, the refusals and each bucket).
std::string ReportText(const BenchReport& report);

// JSON string literal for `text` (quotes included).
std::string JsonQuote(const std::string& text);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_LOADGEN_REPORT_H_

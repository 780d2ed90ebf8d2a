// fuserank-bench: a gRPC load generator for any fuserank.v1.Ranker server.
//   fuserank-bench --target=127.0.0.1:8700 --model=config/models/demo.yaml
//       --candidates=256 --concurrency=4 --duration=10 --warmup=3 --json
// Flags accept '-' or '_' inside names (--requests-pool == --requests_pool). With --json
// the last line of stdout is one JSON object (see report.h); progress goes to stderr
// once a second when stdout is a terminal.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/loadgen/load_runner.h"
#include "bench/loadgen/rate_schedule.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/request_pool.h"
#include "engine/model_spec.h"
#include "tools/cli/flags.h"

ABSL_FLAG(std::string, target, "127.0.0.1:8700", "server address host:port");
ABSL_FLAG(std::string, model, "", "model spec YAML (required): tables, dense widths");
ABSL_FLAG(std::string, model_name, "", "RankRequest.model (empty: the server's default)");
ABSL_FLAG(int32_t, candidates, 16, "candidates per request (0..1048576)");
ABSL_FLAG(int32_t, top_k, 10, "RankRequest.top_k (0: all, sorted)");
ABSL_FLAG(int32_t, bag, 1, "ids per feature, every table (1..1048576)");
ABSL_FLAG(double, zipf, 1.05,
          "Zipf exponent of the ids over each table's rows, finite and >= 0 (0: uniform)");
ABSL_FLAG(bool, scatter, true, "scatter Zipf ranks over the rows (hot rows not contiguous)");
ABSL_FLAG(bool, weights, false, "send per-id weights (uniform in [0.5, 1.5))");
ABSL_FLAG(int32_t, concurrency, 0, "closed loop: calls in flight (4 when --rate is not given)");
ABSL_FLAG(double, rate, 0, "open loop: requests per second, Poisson arrivals");
ABSL_FLAG(std::string, schedule, "",
          "open loop in phases, RATE:SECONDS,RATE:SECONDS,... (the measured window; "
          "--duration is ignored and the warm-up runs at the first rate)");
ABSL_FLAG(double, bucket, 0, "> 0: also report the window in buckets of this many seconds");
ABSL_FLAG(double, duration, 10, "measured seconds");
ABSL_FLAG(double, warmup, 2, "seconds of load before the measured window");
ABSL_FLAG(int32_t, requests_pool, 512, "distinct pre-built requests, cycled");
ABSL_FLAG(uint64_t, seed, 1, "seed of requests and arrival times");
ABSL_FLAG(int32_t, channels, 1, "gRPC channels (connections)");
ABSL_FLAG(int32_t, threads, 1, "completion-queue threads");
ABSL_FLAG(int32_t, timeout_ms, 5000, "deadline of every call");
ABSL_FLAG(int32_t, connect_timeout_ms, 5000, "the target must accept a connection within this");
ABSL_FLAG(int32_t, max_outstanding, 4096, "open loop: most calls in flight");
ABSL_FLAG(bool, validate, true, "check every response: item count, scores sorted in [0, 1]");
ABSL_FLAG(bool, json, false, "print one JSON object as the last line of stdout");

namespace {

// absl flags have no '-' in names; accept --requests-pool as --requests_pool.
std::vector<char*> NormalizeFlagNames(int argc, char** argv, std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& arg : storage) out.push_back(arg.data());
  return out;
}

using fuserank::bench::RequestOptions;
using fuserank::bench::RunOptions;

// Exit 2 for what the flags asked (InvalidArgument), 1 for the rest (no connection, ...).
int Fail(const absl::Status& status) {
  std::fprintf(stderr, "fuserank-bench: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// The requests' flags; BuildRequestPool checks the rest of them against the model.
absl::StatusOr<RequestOptions> RequestFromFlags() {
  RequestOptions request;
  request.candidates = absl::GetFlag(FLAGS_candidates);
  if (absl::GetFlag(FLAGS_top_k) < 0) return absl::InvalidArgumentError("--top_k must be >= 0");
  request.top_k = static_cast<uint32_t>(absl::GetFlag(FLAGS_top_k));
  request.bag = absl::GetFlag(FLAGS_bag);
  request.zipf_alpha = absl::GetFlag(FLAGS_zipf);
  request.scatter = absl::GetFlag(FLAGS_scatter);
  request.weights = absl::GetFlag(FLAGS_weights);
  request.model_name = absl::GetFlag(FLAGS_model_name);
  request.seed = absl::GetFlag(FLAGS_seed);
  return request;
}

// The load's flags: closed loop (--concurrency, 4 when nothing is given) or open loop
// (--rate, or --schedule's phases), never both.
absl::StatusOr<RunOptions> RunFromFlags() {
  RunOptions run;
  run.target = absl::GetFlag(FLAGS_target);
  run.rate = absl::GetFlag(FLAGS_rate);
  run.concurrency = absl::GetFlag(FLAGS_concurrency);
  // SimpleAtod takes "inf" and "nan"; a negative or NaN rate must not turn into the
  // closed-loop default below.
  if (!std::isfinite(run.rate) || run.rate < 0) {
    return absl::InvalidArgumentError("--rate must be finite and >= 0");
  }
  if (run.concurrency < 0) return absl::InvalidArgumentError("--concurrency must be >= 0");
  absl::StatusOr<std::vector<fuserank::bench::RatePhase>> schedule =
      fuserank::bench::ParseSchedule(absl::GetFlag(FLAGS_schedule));
  if (!schedule.ok()) return schedule.status();
  run.schedule = *std::move(schedule);
  if (!run.schedule.empty()) {
    if (run.rate > 0) return absl::InvalidArgumentError("give --rate or --schedule, not both");
    run.rate = run.schedule.front().rate;
  }
  if (run.rate > 0 && run.concurrency > 0) {
    return absl::InvalidArgumentError("give --concurrency or --rate, not both");
  }
  if (run.rate <= 0 && run.concurrency <= 0) run.concurrency = 4;
  run.duration_s = absl::GetFlag(FLAGS_duration);
  run.bucket_s = absl::GetFlag(FLAGS_bucket);
  run.warmup_s = absl::GetFlag(FLAGS_warmup);
  run.channels = absl::GetFlag(FLAGS_channels);
  run.threads = absl::GetFlag(FLAGS_threads);
  run.timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  run.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  run.connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  run.validate = absl::GetFlag(FLAGS_validate);
  run.seed = absl::GetFlag(FLAGS_seed);
  run.progress = isatty(STDOUT_FILENO) != 0;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, storage);
  fuserank::cli::ParseFlagsOrExit(
      static_cast<int>(args.size()), args.data(), "fuserank-bench",
      "gRPC load generator for fuserank.v1.Ranker.\n  fuserank-bench --target=HOST:PORT "
      "--model=MODEL.yaml [--candidates=N] [--concurrency=C | --rate=QPS] [--json]",
      {"bench/loadgen/"});

  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return Fail(absl::InvalidArgumentError("--model=MODEL.yaml is required"));
  absl::StatusOr<fuserank::engine::ModelSpec> spec =
      fuserank::engine::ParseModelSpecFile(model_path);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<RequestOptions> request = RequestFromFlags();
  if (!request.ok()) return Fail(request.status());
  const int pool_size = absl::GetFlag(FLAGS_requests_pool);
  absl::StatusOr<fuserank::bench::RequestPool> pool =
      fuserank::bench::BuildRequestPool(*spec, *request, pool_size);
  if (!pool.ok()) return Fail(pool.status());
  absl::StatusOr<RunOptions> run = RunFromFlags();
  if (!run.ok()) return Fail(run.status());

  absl::StatusOr<fuserank::bench::RunResult> result = fuserank::bench::RunLoad(*run, *pool);
  if (!result.ok()) return Fail(result.status());
  fuserank::bench::BenchReport report;
  report.target = run->target;
  report.model = spec->name;
  report.run = *run;
  report.request = *request;
  report.requests_pool = pool_size;
  report.request_bytes = pool->mean_bytes;
  report.result = *std::move(result);
  std::fputs(fuserank::bench::ReportText(report).c_str(), stdout);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", fuserank::bench::ReportJson(report).c_str());
  }
  std::fflush(stdout);
  return 0;
}

// fuserank-score-compare: the same random requests to two fuserank servers, every
// candidate's score compared.
//   fuserank-score-compare --test=127.0.0.1:18700 --reference=127.0.0.1:18710
//       --model=bench.yaml --requests=200
// Requests cycle through four shapes (16 candidates one-hot; 256 with 3-id weighted bags;
// 1000 one-hot weighted; 64 with 6-id bags), top_k 0 so that every candidate is ranked.
// Prints one JSON line ({"bench":"compare", ...}) and exits 0 when every score is within
// --tolerance of the reference's and no ranking differs beyond it; 1 otherwise.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/compare/score_diff.h"
#include "bench/loadgen/request_pool.h"
#include "engine/model_spec.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "tools/cli/flags.h"

ABSL_FLAG(std::string, test, "127.0.0.1:8700", "the server under test, host:port");
ABSL_FLAG(std::string, reference, "", "the reference server, host:port (required)");
ABSL_FLAG(std::string, model, "", "model spec YAML both servers serve (required)");
ABSL_FLAG(std::string, label, "", "name of the comparison in the JSON line (default: the model's)");
ABSL_FLAG(int32_t, requests, 200, "requests to compare");
ABSL_FLAG(uint64_t, seed, 1, "seed of the requests");
ABSL_FLAG(double, tolerance, 2e-6, "largest allowed |score difference|");
ABSL_FLAG(int32_t, timeout_ms, 10000, "deadline of every call (and of the first connection)");

namespace fuserank::bench {
namespace {

struct Shape {
  int candidates;
  int bag;
  bool weights;
};
constexpr Shape kShapes[] = {{16, 1, false}, {256, 3, true}, {1000, 1, true}, {64, 6, false}};

std::unique_ptr<v1::Ranker::Stub> Connect(const std::string& target, int timeout_ms) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::milliseconds(timeout_ms))) {
    std::fprintf(stderr, "fuserank-score-compare: cannot connect to %s\n", target.c_str());
    return nullptr;
  }
  return v1::Ranker::NewStub(channel);
}

grpc::Status Call(v1::Ranker::Stub& stub, const v1::RankRequest& request, int timeout_ms,
                  v1::RankResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  return stub.Rank(&context, request, response);
}

int Run() {
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string reference = absl::GetFlag(FLAGS_reference);
  if (model_path.empty() || reference.empty()) {
    std::fprintf(stderr, "fuserank-score-compare: --model and --reference are required\n");
    return 2;
  }
  // A run that compares nothing (or within a NaN tolerance) would pass: refuse it.
  const int requests = absl::GetFlag(FLAGS_requests);
  const double tolerance = absl::GetFlag(FLAGS_tolerance);
  const int timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  if (requests < 1 || !(tolerance >= 0) || !std::isfinite(tolerance) || timeout_ms < 1) {
    std::fprintf(stderr,
                 "fuserank-score-compare: want --requests >= 1, a finite --tolerance >= 0 and "
                 "--timeout_ms >= 1 (got %d, %g, %d)\n",
                 requests, tolerance, timeout_ms);
    return 2;
  }
  absl::StatusOr<engine::ModelSpec> spec = engine::ParseModelSpecFile(model_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "fuserank-score-compare: %s\n", spec.status().ToString().c_str());
    return 2;
  }
  auto test = Connect(absl::GetFlag(FLAGS_test), timeout_ms);
  auto ref = Connect(reference, timeout_ms);
  if (test == nullptr || ref == nullptr) return 1;
  std::vector<RequestGenerator> generators;
  generators.reserve(std::size(kShapes));
  for (const Shape& s : kShapes) {
    RequestOptions options;
    options.candidates = s.candidates;
    options.bag = s.bag;
    options.weights = s.weights;
    options.top_k = 0;
    options.seed = absl::GetFlag(FLAGS_seed) + generators.size();
    generators.emplace_back(*spec, options);
  }
  ScoreDiff diff;
  v1::RankRequest request;
  v1::RankResponse got, want;
  for (int i = 0; i < requests; ++i) {
    generators[i % generators.size()].Next(&request);
    const grpc::Status a = Call(*test, request, timeout_ms, &got);
    const grpc::Status b = Call(*ref, request, timeout_ms, &want);
    if (!a.ok() || !b.ok()) {
      AddError(absl::StrCat("request ", i, ": test ", a.error_message(), "; reference ",
                            b.error_message()),
               &diff);
      continue;
    }
    AddComparison(got, want, request.candidates_size(), tolerance, &diff);
  }
  const std::string label =
      absl::GetFlag(FLAGS_label).empty() ? spec->name : absl::GetFlag(FLAGS_label);
  std::printf(
      "{\"bench\":\"compare\",\"model\":\"%s\",\"requests\":%d,\"max_abs_diff\":%.3g,"
      "\"order_mismatches\":%d,\"near_tie_swaps\":%d,\"errors\":%d,\"tolerance\":%.3g}\n",
      label.c_str(), diff.requests, diff.max_abs_diff, diff.order_mismatches, diff.near_tie_swaps,
      diff.errors, tolerance);
  if (!diff.first_error.empty()) {
    std::fprintf(stderr, "fuserank-score-compare: %s\n", diff.first_error.c_str());
  }
  const bool ok = diff.errors == 0 && diff.order_mismatches == 0 && diff.max_abs_diff <= tolerance;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace fuserank::bench

int main(int argc, char** argv) {
  fuserank::cli::ParseFlagsOrExit(
      argc, argv, "fuserank-score-compare",
      "Compares two fuserank servers' scores on the same requests.\n"
      "  fuserank-score-compare --test=HOST:PORT --reference=HOST:PORT --model=MODEL.yaml",
      {"bench/compare/"});
  return fuserank::bench::Run();
}

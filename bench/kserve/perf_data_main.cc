// fuserank-kserve-data: writes perf_analyzer's --input-data JSON holding the same requests
// that fuserank-bench sends with the same flags (bench/loadgen's request pool: same seed,
// Zipf ids, bags, dense values, top_k), as KServe v2 tensors (SPEC section 6), so that
// perf_analyzer and fuserank-bench drive the server with the same load.
//   fuserank-kserve-data --model=bench.yaml --candidates=256 --requests_pool=512 --out=F.json
// Also prints the mean ModelInferRequest size (raw_input_contents) and RankRequest size.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/kserve/infer_request.h"
#include "bench/loadgen/request_pool.h"
#include "engine/model_spec.h"

ABSL_FLAG(std::string, model, "", "model spec YAML (required)");
ABSL_FLAG(std::string, model_name, "", "served model name (empty: the server's default)");
ABSL_FLAG(int32_t, candidates, 16, "candidates per request");
ABSL_FLAG(int32_t, top_k, 10, "parameter top_k (0: all, sorted)");
ABSL_FLAG(int32_t, bag, 1, "ids per feature, every table");
ABSL_FLAG(double, zipf, 1.05, "Zipf exponent of the ids (0: uniform)");
ABSL_FLAG(bool, weights, false, "send per-id weights");
ABSL_FLAG(int32_t, requests_pool, 512, "distinct requests (perf_analyzer cycles through them)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the requests (as fuserank-bench --seed)");
ABSL_FLAG(std::string, out, "", "JSON file to write (required)");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "fuserank-kserve-data: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("perf_analyzer input data of fuserank-bench's requests");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_model).empty() || absl::GetFlag(FLAGS_out).empty()) {
    return Fail("--model and --out are required");
  }
  absl::StatusOr<fuserank::engine::ModelSpec> spec =
      fuserank::engine::ParseModelSpecFile(absl::GetFlag(FLAGS_model));
  if (!spec.ok()) return Fail(std::string(spec.status().message()));
  fuserank::bench::RequestOptions options;
  options.candidates = absl::GetFlag(FLAGS_candidates);
  options.top_k = static_cast<uint32_t>(absl::GetFlag(FLAGS_top_k));
  options.bag = absl::GetFlag(FLAGS_bag);
  options.zipf_alpha = absl::GetFlag(FLAGS_zipf);
  options.weights = absl::GetFlag(FLAGS_weights);
  options.model_name = absl::GetFlag(FLAGS_model_name);
  options.seed = absl::GetFlag(FLAGS_seed);
  const int size = absl::GetFlag(FLAGS_requests_pool);
  absl::StatusOr<fuserank::bench::RequestPool> pool =
      fuserank::bench::BuildRequestPool(*spec, options, size);
  if (!pool.ok()) return Fail(std::string(pool.status().message()));

  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::trunc);
  if (!out) return Fail("cannot write " + absl::GetFlag(FLAGS_out));
  out << "{\"data\":[\n";
  double infer_bytes = 0;
  fuserank::v1::RankRequest request;
  for (int i = 0; i < size; ++i) {
    if (!request.ParseFromString(pool->serialized[i])) return Fail("unreadable pool request");
    fuserank::bench::InferRequestOptions typed{fuserank::bench::TensorContents::kTyped, true};
    const inference::ModelInferRequest infer = ToInferRequest(*spec, request, typed);
    out << (i > 0 ? ",\n" : "") << fuserank::bench::PerfAnalyzerEntry(infer);
    fuserank::bench::InferRequestOptions raw{fuserank::bench::TensorContents::kRaw, true};
    infer_bytes += static_cast<double>(ToInferRequest(*spec, request, raw).ByteSizeLong());
  }
  out << "\n]}\n";
  if (!out.good()) return Fail("writing " + absl::GetFlag(FLAGS_out) + " failed");
  std::printf(
      "{\"requests\": %d, \"mean_rank_request_bytes\": %.1f, "
      "\"mean_infer_request_bytes\": %.1f}\n",
      size, pool->mean_bytes, infer_bytes / size);
  return 0;
}

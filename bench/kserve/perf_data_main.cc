// fuserank-kserve-data: writes perf_analyzer's --input-data JSON holding the same requests
// that fuserank-bench sends with the same flags (bench/loadgen's request pool: same seed,
// Zipf ids, bags, dense values), as KServe v2 tensors (SPEC section 6), so that
// perf_analyzer and fuserank-bench drive the server with the same load.
//   fuserank-kserve-data --model=bench.yaml --candidates=256 --requests_pool=512 --out=F.json
// perf_analyzer's input data holds tensors only (each entry's members are the model's
// inputs), so top_k is not in the file: perf_analyzer sends it for every request with
// --request-parameter top_k:N:int. The file is written beside --out under a temporary
// name and renamed over it once whole. Also prints the mean ModelInferRequest size
// (raw_input_contents, with the top_k parameter) and RankRequest size. Exit 2 for bad
// flags, 1 when writing fails.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "bench/loadgen/request_pool.h"
#include "engine/model_spec.h"
#include "engine/status_macros.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_file.h"

ABSL_FLAG(std::string, model, "", "model spec YAML (required)");
ABSL_FLAG(std::string, model_name, "", "served model name (empty: the server's default)");
ABSL_FLAG(int32_t, candidates, 16, "candidates per request (0..1048576)");
ABSL_FLAG(int32_t, top_k, 10,
          "top_k of the requests (0: all, sorted): counted in mean_infer_request_bytes, NOT "
          "written to the file (perf_analyzer's input data holds tensors only); give "
          "perf_analyzer the same value, --request-parameter top_k:N:int");
ABSL_FLAG(int32_t, bag, 1, "ids per feature, every table (1..1048576)");
ABSL_FLAG(double, zipf, 1.05, "Zipf exponent of the ids, finite and >= 0 (0: uniform)");
ABSL_FLAG(bool, weights, false, "send per-id weights");
ABSL_FLAG(int32_t, requests_pool, 512, "distinct requests (perf_analyzer cycles through them)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the requests (as fuserank-bench --seed)");
ABSL_FLAG(std::string, out, "", "JSON file to write (required; not the model's spec or weights)");

namespace fuserank::bench {
namespace {

// `a` and `b` are one file (through links, ., ..); false when either is missing.
bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

// --out can be written: not the model's spec or weights (the input it is made of), not a
// folder, replaceable.
absl::Status CheckOut(const std::string& out, const std::string& model,
                      const engine::ModelSpec& spec) {
  if (SameFile(out, model) || SameFile(out, spec.weights_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--out=", out, " is the model's ",
                                                   SameFile(out, model) ? "spec" : "weights",
                                                   " (--model): name another file"));
  }
  return WithContext(cli::CheckReplaceable(out), "--out");
}

absl::Status WriteData(const engine::ModelSpec& spec, const RequestPool& pool,
                       const std::string& out) {
  ASSIGN_OR_RETURN(std::unique_ptr<cli::OutputFile> file, cli::OutputFile::Create(out));
  RETURN_IF_ERROR(file->Append("{\"data\":[\n"));
  double infer_bytes = 0;
  fuserank::v1::RankRequest request;
  const InferRequestOptions typed{TensorContents::kTyped, true};
  const InferRequestOptions raw{TensorContents::kRaw, true};
  for (size_t i = 0; i < pool.serialized.size(); ++i) {
    if (!request.ParseFromString(pool.serialized[i])) {
      return absl::InternalError("unreadable pool request");
    }
    RETURN_IF_ERROR(file->Append(i > 0 ? ",\n" : ""));
    RETURN_IF_ERROR(file->Append(PerfAnalyzerEntry(ToInferRequest(spec, request, typed))));
    infer_bytes += static_cast<double>(ToInferRequest(spec, request, raw).ByteSizeLong());
  }
  RETURN_IF_ERROR(file->Append("\n]}\n"));
  RETURN_IF_ERROR(file->Commit());
  const double size = static_cast<double>(pool.serialized.size());
  std::printf(
      "{\"requests\": %zu, \"mean_rank_request_bytes\": %.1f, "
      "\"mean_infer_request_bytes\": %.1f}\n",
      pool.serialized.size(), pool.mean_bytes, infer_bytes / size);
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string model = absl::GetFlag(FLAGS_model), out = absl::GetFlag(FLAGS_out);
  if (model.empty() || out.empty()) {
    return absl::InvalidArgumentError("--model and --out are required");
  }
  if (absl::GetFlag(FLAGS_top_k) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--top_k: want >= 0 (0: all), got ", absl::GetFlag(FLAGS_top_k)));
  }
  absl::StatusOr<engine::ModelSpec> parsed = engine::ParseModelSpecFile(model);
  if (!parsed.ok()) {  // what --model names is the flags' problem: exit 2
    return absl::InvalidArgumentError(absl::StrCat("--model: ", parsed.status().message()));
  }
  const engine::ModelSpec& spec = *parsed;
  RETURN_IF_ERROR(CheckOut(out, model, spec));
  RequestOptions options;
  options.candidates = absl::GetFlag(FLAGS_candidates);
  options.top_k = static_cast<uint32_t>(absl::GetFlag(FLAGS_top_k));
  options.bag = absl::GetFlag(FLAGS_bag);
  options.zipf_alpha = absl::GetFlag(FLAGS_zipf);
  options.weights = absl::GetFlag(FLAGS_weights);
  options.model_name = absl::GetFlag(FLAGS_model_name);
  options.seed = absl::GetFlag(FLAGS_seed);
  ASSIGN_OR_RETURN(const RequestPool pool,
                   BuildRequestPool(spec, options, absl::GetFlag(FLAGS_requests_pool)));
  return WriteData(spec, pool, out);
}

}  // namespace
}  // namespace fuserank::bench

int main(int argc, char** argv) {
  fuserank::cli::ParseFlagsOrExit(
      argc, argv, "fuserank-kserve-data",
      "perf_analyzer input data of fuserank-bench's requests:\n  fuserank-kserve-data "
      "--model=MODEL.yaml --out=DATA.json [--candidates=N] [--requests_pool=N]",
      {"bench/kserve/"});
  const absl::Status status = fuserank::bench::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "fuserank-kserve-data: %s\n", std::string(status.message()).c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

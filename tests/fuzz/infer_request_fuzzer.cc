// libFuzzer target: the scan of a ModelInferRequest's wire bytes before it is parsed
// (infer_request_scan.h, TensorDecoder::CheckWire) and TensorDecoder::Append on any bytes.
// Nothing may crash. Wherever protobuf parses the bytes, the scan must read what it read
// (the counts, the model name and version, each input's name and typed values), may call
// them malformed only for a group, and may refuse a request Append() accepts only for a
// bound of its own (parameters, unknown fields, groups); more than 3 outputs aside, which
// the service refuses anyway. A refused Append leaves the batch as it was; Append with the
// inputs the scan resolved gives the same status and batch as Append resolving them itself.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/batch.h"
#include "inference/grpc_service.pb.h"
#include "server/infer_request_scan.h"
#include "server/infer_tensor_view.h"
#include "server/logging.h"
#include "server/tensor_decoder.h"
#include "tests/fuzz/batch_invariants.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_model.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace fuserank::fuzz {
namespace {

// Small limits so the fuzzer reaches them with short inputs.
constexpr fuserank::server::DecodeLimits kLimits{/*max_candidates=*/16, /*max_ids_per_feature=*/8,
                                                 /*max_ids=*/64};

// The model of fuzz_model.h (the seeds use its names).
struct Fixture {
  Fixture() {
    model = FuzzModel();
    decoder = std::make_unique<server::TensorDecoder>(*model, kLimits);
  }

  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<server::TensorDecoder> decoder;
};

// A refusal of the scan's own bounds, which Append() does not share.
bool OwnBound(absl::string_view message) {
  return absl::StrContains(message, "parameters") ||
         absl::StrContains(message, "does not define") || absl::StrContains(message, "a group");
}

}  // namespace
}  // namespace fuserank::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank;  // NOLINT: one function
  static const fuzz::Fixture* const fixture = new fuzz::Fixture();
  const absl::string_view wire(reinterpret_cast<const char*>(data), size);

  server::InferRequestTop top;
  const absl::Status top_status = server::ScanInferTop(wire, &top);
  absl::Status status = top_status;
  server::InferRequestTop checked = top;
  server::TensorDecoder::WireInputs scanned;
  if (status.ok()) status = fixture->decoder->CheckWire(wire, &checked, &scanned);

  inference::ModelInferRequest parsed;
  if (!parsed.ParseFromArray(data, static_cast<int>(size))) {
    fuzz::FuzzVerdict(false, status.ok() ? "protobuf cannot parse it" : status.message());
    return 0;
  }
  // The scan's own verdict on malformed bytes, not a message about an input that begins
  // with the input's (client-chosen) name, which may read the same.
  bool names_an_input = false;
  for (const inference::ModelInferRequest::InferInputTensor& input : parsed.inputs()) {
    names_an_input =
        names_an_input || absl::StartsWith(status.message(), absl::StrCat(input.name(), ":")) ||
        absl::StartsWith(status.message(), absl::StrCat(server::LogSafe(input.name()), ":"));
  }
  FUZZ_CHECK(status.ok() || names_an_input ||
                 !absl::StartsWith(status.message(),
                                   "the request is not a valid inference.ModelInferRequest: ") ||
                 absl::StrContains(status.message(), "a group"),
             absl::StrCat("protobuf parses what the scan calls malformed: ", status.message()));
  if (top_status.ok()) {
    FUZZ_CHECK(top.inputs == parsed.inputs_size() && top.outputs == parsed.outputs_size() &&
                   top.raw_input_contents == parsed.raw_input_contents_size() &&
                   top.model_name == parsed.model_name() &&
                   top.model_version == parsed.model_version(),
               absl::StrCat("top level: scan ", top.inputs, "/", top.outputs, "/",
                            top.raw_input_contents, " '", top.model_name, "', parse ",
                            parsed.inputs_size(), "/", parsed.outputs_size(), "/",
                            parsed.raw_input_contents_size(), " '", parsed.model_name(), "'"));
  }
  if (status.ok()) {
    server::InferRequestTop again = top;
    const absl::Status walked =
        server::ScanInferInputs(wire, &again, [&](const server::ScannedInput& input) {
          const auto& tensor = parsed.inputs(input.index);
          const int64_t strings = tensor.contents().bytes_contents_size();
          FUZZ_CHECK(input.name == tensor.name() &&
                         input.elements == server::TypedElements(tensor.contents()) - strings &&
                         input.bytes_values == strings,
                     absl::StrCat("inputs[", input.index, "]: scan '", input.name, "' ",
                                  input.elements, " values, parse '", tensor.name(), "' ",
                                  server::TypedElements(tensor.contents())));
          return absl::OkStatus();
        });
    FUZZ_CHECK(walked.ok(), walked.ToString());
  }

  engine::Batch batch;
  server::InferRequestInfo info;
  const absl::Status appended = fixture->decoder->Append(parsed, fixture->model, &batch, &info);
  if (appended.ok()) {
    fuzz::CheckBatchInvariants(batch, fuzz::kLimits);
    FUZZ_CHECK(status.ok() || fuzz::OwnBound(status.message()) || parsed.outputs_size() > 3,
               absl::StrCat("the scan refuses what Append accepts: ", status.message()));
  } else {
    FUZZ_CHECK(batch.num_requests() == 0 && batch.model == nullptr,
               "a refused Append changed the batch");
  }
  if (status.ok()) {  // the names the scan resolved stand for Resolve(): the same answer
    engine::Batch again;
    server::InferRequestInfo again_info;
    const absl::Status with_scan =
        fixture->decoder->Append(parsed, fixture->model, &again, &again_info, &scanned);
    FUZZ_CHECK(with_scan == appended && (!appended.ok() || fuzz::SameBatch(batch, again)),
               absl::StrCat("Append with the scan's inputs: ", with_scan.ToString(),
                            ", without: ", appended.ToString()));
  }
  const bool accepted = status.ok() && appended.ok();
  fuzz::FuzzVerdict(accepted, !status.ok() ? status.message() : appended.message());
  return 0;
}

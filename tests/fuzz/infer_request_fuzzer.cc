// libFuzzer target: the scan of a ModelInferRequest's wire bytes before it is parsed
// (infer_request_scan.h, TensorDecoder::CheckWire) and TensorDecoder::Append on any bytes.
// Nothing may crash. Wherever protobuf parses the bytes, the scan must read what it read
// (the counts, the model name and version, each input's name and typed values), may call
// them malformed only for a group, and may refuse a request Append() accepts only for a
// bound of its own (parameters, unknown fields, groups); more than 3 outputs aside, which
// the service refuses anyway. Append must accept exactly the requests that a naive
// re-statement of SPEC sections 6 and 3 accepts (reference_infer.h turns the tensors into
// the RankRequest they stand for, reference_decode.h judges and decodes that), and then
// give the reference's rows, weights, dense values, top_k and item ids, and the very batch
// RequestDecoder gives that RankRequest (SPEC 6: the same scores bit for bit), the same
// after an earlier request. A refusal is INVALID_ARGUMENT (NOT_FOUND, an unknown model, is
// the service's, not reachable here) whose message starts with the input it is about (or
// names engine.max_batch_ids), the same code RequestDecoder gives the equivalent request;
// what the client would read (the scan's refusal, else Append's) is printable UTF-8. A
// refused Append leaves the batch as it was; Append with the inputs the scan resolved gives
// the same status and batch as Append resolving them itself.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/batch.h"
#include "engine/escape_text.h"
#include "inference/grpc_service.pb.h"
#include "server/infer_request_scan.h"
#include "server/infer_tensor_view.h"
#include "server/logging.h"
#include "server/request_decoder.h"
#include "server/tensor_decoder.h"
#include "tests/fuzz/batch_invariants.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_model.h"
#include "tests/fuzz/fuzz_verdict.h"
#include "tests/fuzz/reference_decode.h"
#include "tests/fuzz/reference_infer.h"

namespace fuserank::fuzz {
namespace {

using inference::ModelInferRequest;

// Small limits so the fuzzer reaches them with short inputs.
constexpr fuserank::server::DecodeLimits kLimits{/*max_candidates=*/16, /*max_ids_per_feature=*/8,
                                                 /*max_ids=*/64};

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* request, const char* name,
                                              const char* datatype, std::vector<int64_t> shape) {
  ModelInferRequest::InferInputTensor* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t dim : shape) input->add_shape(dim);
  return input;
}

// The model of fuzz_model.h (the seeds use its names).
struct Fixture {
  Fixture() {
    model = FuzzModel();
    decoder = std::make_unique<server::TensorDecoder>(*model, kLimits);
    rank_decoder = std::make_unique<server::RequestDecoder>(model, kLimits);
    for (const engine::EmbeddingTable& table : model->tables()) {
      subjects.push_back(table.name);
      subjects.push_back(table.name + "__lengths");
      subjects.push_back(table.name + "__weights");
    }
    for (const char* other :
         {"user_dense", "item_dense", "item_ids", "raw_input_contents", "parameters.top_k"}) {
      subjects.push_back(other);
    }
    // A valid request decoded first, so errors must also leave an earlier request intact.
    AddInput(&first, "item_ids", "INT64", {1})->mutable_contents()->add_int64_contents(7);
    AddInput(&first, "item_0", "INT64", {1})->mutable_contents()->add_int64_contents(-3);
    AddInput(&first, "item_0__lengths", "INT32", {1})->mutable_contents()->add_int_contents(1);
    auto* user = AddInput(&first, "user_dense", "FP32", {1, 2})->mutable_contents();
    for (float v : {0.5f, -0.5f}) user->add_fp32_contents(v);
    auto* item = AddInput(&first, "item_dense", "FP32", {1, 3})->mutable_contents();
    for (float v : {1.0f, 2.0f, 3.0f}) item->add_fp32_contents(v);
  }

  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<server::TensorDecoder> decoder;
  std::unique_ptr<server::RequestDecoder> rank_decoder;
  std::vector<std::string> subjects;  // what a refusal's message may begin with
  ModelInferRequest first;
};

// A refusal of the scan's own bounds, which Append() does not share.
bool OwnBound(absl::string_view message) {
  return absl::StrContains(message, "parameters") ||
         absl::StrContains(message, "does not define") || absl::StrContains(message, "a group");
}

// Printable UTF-8: no control characters (EscapeText would change nothing but backslashes).
bool Printable(absl::string_view message) { return engine::IsPrintableUtf8(message); }

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Append's refusal: INVALID_ARGUMENT, its message starting with the input it is about.
void CheckRefusal(const Fixture& f, const ModelInferRequest& request, const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
  const absl::string_view message = status.message();
  bool named = absl::StartsWith(message, "the request holds ") &&
               absl::StrContains(message, "engine.max_batch_ids");
  for (const std::string& subject : f.subjects) {
    named = named || absl::StartsWith(message, absl::StrCat(subject, ":")) ||
            absl::StartsWith(message, absl::StrCat(subject, "["));
  }
  for (const ModelInferRequest::InferInputTensor& input : request.inputs()) {
    named = named || absl::StartsWith(message, absl::StrCat(input.name(), ":")) ||
            absl::StartsWith(message, absl::StrCat(server::LogSafe(input.name()), ":"));
  }
  FUZZ_CHECK(named, absl::StrCat("the refusal names no input: ", message));
}

// What the reference makes of a request: its tensors as a RankRequest, and that decoded.
struct Expected {
  ReferenceInfer tensors;
  ReferenceResult decoded;
  bool valid() const { return tensors.valid && decoded.valid; }
  const std::string& why() const { return tensors.valid ? decoded.reason : tensors.reason; }
};

Expected ReferenceOf(const Fixture& f, const ModelInferRequest& request) {
  Expected expected;
  expected.tensors = ReferenceInferToRank(*f.model, kLimits, request);
  if (expected.tensors.valid) {
    expected.decoded = ReferenceDecode(*f.model, kLimits, expected.tensors.rank);
  }
  return expected;
}

// Append's verdict and batch (`batch` held nothing before) against the reference's, and
// against RequestDecoder's on the equivalent RankRequest.
void CheckAgainstReference(const Fixture& f, const ModelInferRequest& request,
                           const Expected& expected, const absl::Status& appended,
                           const engine::Batch& batch, const server::InferRequestInfo& info) {
  if (!appended.ok()) {
    FUZZ_CHECK(!expected.valid(), absl::StrCat("Append refused a request the reference accepts: ",
                                               appended.message()));
    CheckRefusal(f, request, appended);
  } else {
    FUZZ_CHECK(expected.valid(), absl::StrCat("Append accepted a request the reference refuses (",
                                              expected.why(), ")"));
    CheckLastRequest(batch, expected.decoded);
    const std::vector<int64_t>& item_ids = expected.tensors.item_ids;
    FUZZ_CHECK(info.num_candidates == expected.decoded.num_candidates &&
                   info.item_ids.size() == static_cast<int64_t>(item_ids.size()),
               absl::StrCat(info.num_candidates, " candidates, expected ",
                            expected.decoded.num_candidates));
    for (int64_t c = 0; c < info.item_ids.size(); ++c) {
      FUZZ_CHECK(info.item_ids[c] == item_ids[c], absl::StrCat("item_ids[", c, "] differs"));
    }
  }
  if (!expected.tensors.valid) return;
  // SPEC 6: the equivalent RankRequest gets the same status and, bit for bit, the same batch.
  engine::Batch ranked;
  const absl::Status rank_status = f.rank_decoder->Append(expected.tensors.rank, &ranked);
  FUZZ_CHECK(rank_status.code() == appended.code(),
             absl::StrCat("Append says ", appended.ToString(), ", RequestDecoder on the ",
                          "equivalent RankRequest ", rank_status.ToString()));
  if (appended.ok()) {
    FUZZ_CHECK(SameBatch(batch, ranked) && SameBits(batch.user.weights, ranked.user.weights) &&
                   SameBits(batch.item.weights, ranked.item.weights) &&
                   SameBits(batch.user_dense, ranked.user_dense) &&
                   SameBits(batch.item_dense, ranked.item_dense),
               "the batch differs from RequestDecoder's of the equivalent RankRequest");
  }
}

// Append after a valid request: the same status, and then the reference's request last in
// the batch; a refusal leaves the batch as it was.
void CheckAfterAnother(const Fixture& f, const ModelInferRequest& request, const Expected& expected,
                       const absl::Status& alone) {
  engine::Batch batch;
  server::InferRequestInfo info;
  const absl::Status first = f.decoder->Append(f.first, f.model, &batch, &info);
  FUZZ_CHECK(first.ok(), first.ToString());
  const engine::Batch before = batch;
  const absl::Status status = f.decoder->Append(request, f.model, &batch, &info);
  FUZZ_CHECK(status == alone,
             absl::StrCat("the verdict depends on an earlier request: alone ", alone.ToString(),
                          ", after another ", status.ToString()));
  if (!status.ok()) {
    FUZZ_CHECK(SameBatch(before, batch), "a refused Append changed the earlier request's batch");
    return;
  }
  CheckBatchInvariants(batch, kLimits);
  FUZZ_CHECK(batch.num_requests() == 2, "not exactly one request added");
  CheckLastRequest(batch, expected.decoded);
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
  // What the client reads when the scan refuses: INVALID_ARGUMENT, a printable message.
  FUZZ_CHECK(status.ok() || (status.code() == absl::StatusCode::kInvalidArgument &&
                             !status.message().empty() && fuzz::Printable(status.message())),
             absl::StrCat("the scan's refusal: ", engine::EscapeText(status.ToString())));

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
  const fuzz::Expected expected = fuzz::ReferenceOf(*fixture, parsed);
  fuzz::CheckAgainstReference(*fixture, parsed, expected, appended, batch, info);
  fuzz::CheckAfterAnother(*fixture, parsed, expected, appended);
  if (status.ok()) {  // the names the scan resolved stand for Resolve(): the same answer
    engine::Batch again;
    server::InferRequestInfo again_info;
    const absl::Status with_scan =
        fixture->decoder->Append(parsed, fixture->model, &again, &again_info, &scanned);
    FUZZ_CHECK(with_scan == appended && (!appended.ok() || fuzz::SameBatch(batch, again)),
               absl::StrCat("Append with the scan's inputs: ", with_scan.ToString(),
                            ", without: ", appended.ToString()));
  }
  // What the client reads when the scan passes and Append refuses (whose refusals of an
  // input name that the scan would have refused first may quote it raw).
  FUZZ_CHECK(
      !status.ok() || appended.ok() ||
          (!appended.message().empty() && fuzz::Printable(appended.message())),
      absl::StrCat("the refusal is not printable: ", engine::EscapeText(appended.message())));
  const bool accepted = status.ok() && appended.ok();
  fuzz::FuzzVerdict(accepted, !status.ok() ? status.message() : appended.message());
  return 0;
}

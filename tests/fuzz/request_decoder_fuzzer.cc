// libFuzzer target: RequestDecoder on any bytes. The decoder must never crash, must agree
// with a naive re-statement of SPEC section 3 (reference_decode.h) on which requests are
// valid and what they decode to, must leave the batch untouched on error, and must only
// produce batches whose CSR arrays are consistent. Its wire parse (AppendWire on the raw
// bytes) must accept exactly what protobuf's parser accepts, and then give the same status,
// word for word, and the same batch as the protobuf-based decode it replaced
// (bench/decode/baseline_rank_decoder.h) on protobuf's parse of the bytes; and on such
// bytes a parse within the scan's bounds must pass the scan, and one stopped at them not.
// The one-pass decode of the clients' shape (AppendCanonical) may only take bytes that all
// of this accepts, and must then give the same batch.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench/decode/baseline_rank_decoder.h"
#include "engine/batch.h"
#include "fuserank/v1/ranker.pb.h"
#include "server/rank_request_view.h"
#include "server/request_decoder.h"
#include "server/request_scan.h"
#include "tests/fuzz/batch_invariants.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_model.h"
#include "tests/fuzz/fuzz_verdict.h"
#include "tests/fuzz/reference_decode.h"
#include "tests/testing/test_model.h"

namespace fuserank::fuzz {
namespace {

// Small limits so the fuzzer reaches them with short inputs.
constexpr server::DecodeLimits kLimits{/*max_candidates=*/16, /*max_ids_per_feature=*/8};

// The model of fuzz_model.h (that of tests/server/request_decoder_test.cc).
struct Fixture {
  Fixture() {
    model = FuzzModel();
    other_model = BuildFuzzModel(testing::SmallSpec(1, 1, 10, 4));
    decoder = std::make_unique<server::RequestDecoder>(model, kLimits);
    baseline = std::make_unique<bench::BaselineRankDecoder>(model, kLimits);
    other_decoder = std::make_unique<server::RequestDecoder>(other_model, kLimits);
    // A valid request decoded first, so errors must also leave an earlier request intact.
    v1::Feature* f = first.add_user_features();
    f->set_name("user_0");
    f->add_ids(3);
    first.add_user_dense(0.5f);
    first.add_user_dense(-0.5f);
    v1::Candidate* c = first.add_candidates();
    c->mutable_features()->Add()->set_name("item_1");
    c->mutable_features(0)->add_ids(9);
    for (float d : {1.0f, 2.0f, 3.0f}) c->add_dense(d);
  }

  std::shared_ptr<const engine::Model> model;
  std::shared_ptr<const engine::Model> other_model;
  std::unique_ptr<server::RequestDecoder> decoder;
  std::unique_ptr<bench::BaselineRankDecoder> baseline;
  std::unique_ptr<server::RequestDecoder> other_decoder;
  v1::RankRequest first;
};

const Fixture& GetFixture() {
  static const Fixture* fixture = new Fixture();
  return *fixture;
}

// Appends `request` to `batch`, checks the outcome against the reference and returns it.
absl::Status CheckAppend(const Fixture& f, const v1::RankRequest& request, engine::Batch* batch) {
  const engine::Batch before = *batch;
  const absl::Status status = f.decoder->Append(request, batch);
  ReferenceResult expected = ReferenceDecode(*f.model, kLimits, request);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
    const absl::string_view message = status.message();
    FUZZ_CHECK(absl::StartsWith(message, "candidates") || absl::StartsWith(message, "user_dense") ||
                   absl::StartsWith(message, "user_features"),
               absl::StrCat("the error names no request field: ", message));
    FUZZ_CHECK(!expected.valid, absl::StrCat("the decoder rejected a valid request: ", message));
    FUZZ_CHECK(SameBatch(before, *batch), "a failed Append changed the batch");
    return status;
  }
  FUZZ_CHECK(expected.valid,
             absl::StrCat("the decoder accepted an invalid request (", expected.reason, ")"));
  FUZZ_CHECK(batch->model == f.model, "the batch does not point at the decoder's model");
  CheckBatchInvariants(*batch, kLimits);
  CheckLastRequest(*batch, expected);
  FUZZ_CHECK(batch->num_requests() == before.num_requests() + 1, "not exactly one request added");
  return status;
}

// AppendWire on the raw bytes, after a valid request, against protobuf's parse of them
// (`parsed`, null when protobuf refuses them) and the old decoder on that parse.
void CheckWireDecode(const Fixture& f, absl::string_view wire, const v1::RankRequest* parsed) {
  engine::Batch batch;
  FUZZ_CHECK(f.decoder->Append(f.first, &batch).ok(), "the fixed request must decode");
  const engine::Batch before = batch;
  std::vector<int64_t> item_ids = {42};
  // The one-pass decode of the clients' shape first, on copies: when it takes the bytes,
  // AppendWire (the same decode) must end with its batch and item ids; else they are
  // untouched.
  engine::Batch canonical = batch;
  std::vector<int64_t> canonical_ids = item_ids;
  server::CanonicalRequest read;
  const bool took = f.decoder->AppendCanonical(wire, &canonical, &canonical_ids, &read);
  if (!took) {
    FUZZ_CHECK(SameBatch(before, canonical) && canonical_ids == item_ids,
               "AppendCanonical gave up but changed the batch or the item ids");
  }
  const absl::Status status = f.decoder->AppendWire(wire, &batch, &item_ids);
  if (took) {
    FUZZ_CHECK(parsed != nullptr && status.ok(),
               absl::StrCat("AppendCanonical took bytes the parse refuses: ", status.ToString()));
    FUZZ_CHECK(SameBatch(batch, canonical) && item_ids == canonical_ids,
               "AppendCanonical's batch differs from AppendWire's");
    FUZZ_CHECK(read.candidates == parsed->candidates_size() && read.top_k == parsed->top_k() &&
                   read.request_id == parsed->request_id(),
               "AppendCanonical read the request's fields differently");
  }
  if (parsed == nullptr) {
    FUZZ_CHECK(
        status == server::NotARankRequest(wire),
        absl::StrCat("protobuf refuses these bytes, the wire decode says ", status.ToString()));
    FUZZ_CHECK(!server::DescribeRankRequestFault(wire).empty(),
               "protobuf refuses these bytes, and no fault is found in them");
  } else {
    FUZZ_CHECK(server::DescribeRankRequestFault(wire).empty(),
               absl::StrCat("protobuf parses these bytes, and a fault is found in them: ",
                            server::DescribeRankRequestFault(wire)));
    // A parse within the scan's bounds is a request the scan passes, with the view's ids;
    // a parse stopped at them is one the scan refuses.
    server::RankRequestView view;
    server::RequestShape scanned;
    google::protobuf::io::ArrayInputStream bytes(wire.data(), static_cast<int>(wire.size()));
    const absl::Status scan = server::ScanFeatures(&bytes, f.decoder->scan_limits(), &scanned);
    if (server::ParseRankRequest(wire, f.decoder->parse_bounds(), &view)) {
      FUZZ_CHECK(
          scan.ok() && scanned.ids == static_cast<int64_t>(view.ids.size()),
          absl::StrCat("the parse stayed within its bounds, the scan says ", scan.ToString()));
    } else {
      FUZZ_CHECK(!scan.ok(), "the parse stopped at its bounds, but the scan passes");
    }
    engine::Batch expected;
    FUZZ_CHECK(f.baseline->Append(f.first, &expected).ok(), "the fixed request must decode");
    const absl::Status old = f.baseline->Append(*parsed, &expected);
    FUZZ_CHECK(status.code() == old.code() && status.message() == old.message(),
               absl::StrCat("the wire decode says ", status.ToString(), ", the old decoder ",
                            old.ToString()));
    FUZZ_CHECK(SameBatch(expected, batch), "the wire decode's batch differs from the old one's");
    if (status.ok()) {
      FUZZ_CHECK(item_ids.size() == static_cast<size_t>(parsed->candidates_size()) + 1,
                 "not one item id per candidate");
      for (int c = 0; c < parsed->candidates_size(); ++c) {
        FUZZ_CHECK(item_ids[c + 1] == parsed->candidates(c).item_id(), "item ids differ");
      }
      return;
    }
  }
  FUZZ_CHECK(SameBatch(before, batch), "a failed AppendWire changed the batch");
  FUZZ_CHECK(item_ids.size() == 1, "a failed AppendWire changed the item ids");
}

}  // namespace
}  // namespace fuserank::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank;
  const fuzz::Fixture& f = fuzz::GetFixture();
  v1::RankRequest request;
  const bool parsed = request.ParseFromArray(data, static_cast<int>(size));
  fuzz::CheckWireDecode(f, absl::string_view(reinterpret_cast<const char*>(data), size),
                        parsed ? &request : nullptr);
  if (!parsed) {
    fuzz::FuzzVerdict(false, "not a serialized RankRequest");
    return 0;
  }

  engine::Batch empty;
  const absl::Status status = fuzz::CheckAppend(f, request, &empty);
  fuzz::FuzzVerdict(status.ok(), status.message());

  engine::Batch after_first;
  const absl::Status first = f.decoder->Append(f.first, &after_first);
  FUZZ_CHECK(first.ok(), first.ToString());
  const absl::Status second = fuzz::CheckAppend(f, request, &after_first);
  FUZZ_CHECK(second.ok() == status.ok(),
             absl::StrCat("the verdict depends on the batch's earlier request: alone ",
                          status.ToString(), ", after another ", second.ToString()));

  // A batch that holds another model's request is refused whatever the request.
  engine::Batch other;
  if (f.other_decoder->Append(request, &other).ok()) {
    const engine::Batch before = other;
    const absl::Status status = f.decoder->Append(request, &other);
    FUZZ_CHECK(status.code() == absl::StatusCode::kInternal, status.ToString());
    FUZZ_CHECK(fuzz::SameBatch(before, other), "a refused Append changed the batch");
  }
  return 0;
}

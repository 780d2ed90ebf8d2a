// The scan of a ModelInferRequest's wire bytes before it is parsed (infer_request_scan.h)
// and TensorDecoder::CheckWire: it reads what protobuf's parse reads, counts what parsing
// would build, refuses what no valid request holds, and never refuses what Append()
// accepts.
#include "server/infer_request_scan.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tensor_decoder.h"
#include "tests/server/infer_test_util.h"

namespace fuserank::server {
namespace {

using inference::ModelInferRequest;
using ::testing::HasSubstr;
using testing::SetFp32;
using testing::SetInt32;
using testing::SetInt64;

// A varint, a tag and a length-delimited field, for bytes protobuf's API will not write.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Tag(int field, int wire_type) { return Varint(uint64_t(field) << 3 | wire_type); }
std::string Delimited(int field, const std::string& bytes) {
  return Tag(field, 2) + Varint(bytes.size()) + bytes;
}

// The numeric values of a parsed input's typed contents, as the scan counts them.
int64_t ParsedElements(const ModelInferRequest::InferInputTensor& input) {
  return TypedElements(input.contents()) - input.contents().bytes_contents_size();
}

class InferRequestScanTest : public ::testing::Test {
 protected:
  InferRequestScanTest()
      : model_(testing::BuildInferTestModel()), decoder_(*model_, DecodeLimits{8, 4, 10}) {}

  // What KServeService::Start runs before parsing.
  absl::Status Check(const std::string& bytes) {
    InferRequestTop top;
    if (absl::Status s = ScanInferTop(bytes, &top); !s.ok()) return s;
    return decoder_.CheckWire(bytes, &top);
  }
  absl::Status Check(const ModelInferRequest& request) {
    return Check(request.SerializeAsString());
  }
  // Check() refuses `request` with INVALID_ARGUMENT and a message containing `message`.
  void ExpectRefused(const std::string& bytes, const std::string& message) {
    const absl::Status status = Check(bytes);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
    EXPECT_LT(status.message().size(), 1024u);
  }

  std::shared_ptr<const engine::Model> model_;
  TensorDecoder decoder_;
};

TEST_F(InferRequestScanTest, ReadsTheTopLevelAsParsingDoes) {
  ModelInferRequest request = testing::GoodInferRequest();
  request.set_model_name("first");
  request.add_outputs()->set_name("scores");
  (*request.mutable_parameters())["top_k"].set_int64_param(1);
  ModelInferRequest later;
  later.set_model_name("second");  // appended: parsing keeps the last
  later.set_model_version("7");
  later.add_raw_input_contents("abc");
  const std::string bytes = request.SerializeAsString() + later.SerializeAsString();
  InferRequestTop top;
  ASSERT_TRUE(ScanInferTop(bytes, &top).ok());
  ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(top.model_name, parsed.model_name());
  EXPECT_EQ(top.model_version, parsed.model_version());
  EXPECT_EQ(top.inputs, parsed.inputs_size());
  EXPECT_EQ(top.outputs, 1);
  EXPECT_EQ(top.raw_input_contents, 1);
  EXPECT_EQ(top.unknown_fields, 0);
}

TEST_F(InferRequestScanTest, CountsTypedValuesOfEveryKindPackedOrNot) {
  ModelInferRequest::InferInputTensor input;
  input.set_name("x");
  auto* contents = input.mutable_contents();
  contents->add_bool_contents(true);
  for (int v : {0, 1, 300, -1}) contents->add_int_contents(v);
  for (int64_t v : {int64_t{0}, int64_t{1} << 40, int64_t{-5}}) contents->add_int64_contents(v);
  contents->add_uint_contents(7);
  contents->add_uint64_contents(uint64_t{1} << 63);
  for (float v : {1.0f, 2.0f}) contents->add_fp32_contents(v);
  contents->add_fp64_contents(3.0);
  for (const char* v : {"", "bytes"}) contents->add_bytes_contents(v);
  // Unpacked forms of the numeric fields, and a second contents message (parsing merges).
  std::string unpacked = Tag(3, 0) + Varint(9) + Tag(6, 5) + std::string(4, '\0') + Tag(7, 1) +
                         std::string(8, '\0') + Tag(1, 0) + Varint(1);
  std::string tensor = input.SerializeAsString() + Delimited(5, unpacked);
  const std::string bytes = Delimited(5, tensor);
  ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  InferRequestTop top;
  ASSERT_TRUE(ScanInferTop(bytes, &top).ok());
  std::vector<ScannedInput> seen;
  ASSERT_TRUE(ScanInferInputs(bytes, &top, [&](const ScannedInput& in) {
                seen.push_back(in);
                return absl::OkStatus();
              }).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].name, "x");
  EXPECT_EQ(seen[0].elements, ParsedElements(parsed.inputs(0)));
  EXPECT_EQ(seen[0].elements, 17);  // 13 packed, 4 unpacked
  EXPECT_EQ(seen[0].bytes_values, parsed.inputs(0).contents().bytes_contents_size());
  EXPECT_EQ(seen[0].bytes_values, 2);
  EXPECT_EQ(top.values, 17);
}

TEST_F(InferRequestScanTest, PassesTheGoodRequestsTypedAndRaw) {
  EXPECT_TRUE(Check(testing::GoodInferRequest()).ok()) << Check(testing::GoodInferRequest());
  const ModelInferRequest raw =
      bench::ToInferRequest(testing::InferTestModel().spec, testing::GoodRankRequest(),
                            {bench::TensorContents::kRaw, true});
  EXPECT_TRUE(Check(raw).ok()) << Check(raw);
}

TEST_F(InferRequestScanTest, RefusesMoreInputsThanTheModelTakesBeforeParsing) {
  // 15 inputs at most (4 tables x 3, user_dense, item_dense, item_ids). A million empty
  // inputs would parse into a million tensors; the scan only counts them.
  std::string bytes = testing::GoodInferRequest().SerializeAsString();
  for (int i = 0; i < 1000000; ++i) bytes += Delimited(5, "");
  ExpectRefused(bytes, "inputs: 1000013 input tensors, but model 'small' takes at most 15");
}

TEST_F(InferRequestScanTest, RefusesCountsNoValidRequestHas) {
  ModelInferRequest request = testing::GoodInferRequest();
  for (int i = 0; i < 4; ++i) request.add_outputs()->set_name("scores");
  ExpectRefused(request.SerializeAsString(),
                "outputs: 4 outputs requested, but model 'small' has 3");
  request = testing::GoodInferRequest();
  for (int i = 0; i <= request.inputs_size(); ++i) request.add_raw_input_contents("");
  ExpectRefused(request.SerializeAsString(), "raw_input_contents: 14 entries for 13 inputs");
}

TEST_F(InferRequestScanTest, RefusesParameterMapsAndUnknownFieldsPastTheirBounds) {
  ModelInferRequest request = testing::GoodInferRequest();
  for (int i = 0; i <= kMaxInferParameters; ++i) {
    (*request.mutable_parameters())[std::to_string(i)].set_bool_param(true);
  }
  ExpectRefused(request.SerializeAsString(), "parameters: more than 64 parameters");
  request = testing::GoodInferRequest();
  for (int i = 0; i <= kMaxInferParameters; ++i) {
    (*request.mutable_inputs(2)->mutable_parameters())[std::to_string(i)].set_int64_param(i);
  }
  ExpectRefused(request.SerializeAsString(), "inputs[2].parameters: more than 64 parameters");
  request = testing::GoodInferRequest();
  auto* output = request.add_outputs();
  output->set_name("scores");
  for (int i = 0; i <= kMaxInferParameters; ++i) {
    (*output->mutable_parameters())[std::to_string(i)].set_string_param("v");
  }
  ExpectRefused(request.SerializeAsString(), "outputs[0].parameters: more than 64 parameters");
  // Up to 64 parameters and 64 unknown fields pass; one more unknown field does not.
  request = testing::GoodInferRequest();
  for (int i = 1; i < kMaxInferParameters; ++i) {
    (*request.mutable_parameters())[std::to_string(i)].set_double_param(i);
  }
  std::string bytes = request.SerializeAsString();
  for (int i = 0; i < kMaxInferUnknownFields; ++i) bytes += Tag(100 + i, 0) + Varint(i);
  EXPECT_TRUE(Check(bytes).ok()) << Check(bytes);
  ExpectRefused(bytes + Tag(99, 2) + Varint(0),
                "more than 64 fields that inference.ModelInferRequest does not define (the last "
                "at the request, field 99)");
  // Unknown fields inside an input count too, and a known field of another wire type is
  // one (protobuf keeps it as unknown).
  ExpectRefused(bytes + Delimited(5, Tag(3, 5) + std::string(4, '\0')),
                "(the last at inputs[13], field 3)");
}

TEST_F(InferRequestScanTest, RefusesGroupsAndMalformedBytes) {
  const std::string good = testing::GoodInferRequest().SerializeAsString();
  ExpectRefused(good + Tag(20, 3) + Tag(20, 4), "the request holds a group (field 20)");
  ExpectRefused(good + Delimited(5, Tag(5, 2) + Varint(2) + Tag(9, 3) + Tag(9, 4)),
                "inputs[13].contents holds a group (field 9)");
  ExpectRefused(good + Tag(5, 2) + Varint(50), "not a valid inference.ModelInferRequest");
  ExpectRefused(good + Delimited(5, Tag(3, 2) + Varint(9)), "inputs[13].shape is malformed");
  ExpectRefused(good + Delimited(1, "\xff"), "model_name is not valid UTF-8");
  ExpectRefused(good + Delimited(5, Delimited(1, "\xc0\x80")),
                "inputs[13].name is not valid UTF-8");
  ExpectRefused(good + Tag(4, 4), "the request is malformed");
  // Every string is checked, each named (protobuf's parse would say only that it failed).
  ExpectRefused(good + Delimited(3, "r\xff"), "id is not valid UTF-8");
  ExpectRefused(good + Delimited(4, Delimited(1, "\xff")), "parameters: a key is not valid UTF-8");
  ExpectRefused(good + Delimited(4, Delimited(1, "k") + Delimited(2, Delimited(3, "\xc0\x80"))),
                "parameters: a string_param is not valid UTF-8");
  ExpectRefused(good + Delimited(6, Delimited(1, "\xff")), ".name is not valid UTF-8");
  ExpectRefused(good + Delimited(6, Delimited(1, "scores") + Delimited(2, Delimited(1, "\xff"))),
                ".parameters: a key is not valid UTF-8");
}

TEST_F(InferRequestScanTest, RefusesShapesOfMoreThanEightDimensions) {
  ModelInferRequest request = testing::GoodInferRequest();
  SetInt64(&request, "item_ids", {1, 1, 1, 1, 1, 1, 1, 1, 2}, {5, 6});
  ExpectRefused(request.SerializeAsString(),
                "inputs[12]: its shape has more than 8 dimensions; every input has 1 or 2");
}

TEST_F(InferRequestScanTest, RefusesUnknownAndRepeatedInputsWithAppendsMessages) {
  ModelInferRequest request = testing::GoodInferRequest();
  SetInt64(&request, "nope", {1}, {1});
  ExpectRefused(request.SerializeAsString(), "nope: model 'small' has no table named 'nope'");
  request = testing::GoodInferRequest();
  *request.add_inputs() = request.inputs(0);
  ExpectRefused(request.SerializeAsString(),
                "user_0: input 'user_0' is given twice (inputs[0] and inputs[13]); send each "
                "input once");
}

TEST_F(InferRequestScanTest, RefusesContentsLargerThanTheInputCanHold) {
  // Limits: 8 candidates, 4 ids per bag, 10 ids per request; dense {user: 2, item: 3}.
  struct Case {
    std::string name;
    std::function<void(ModelInferRequest*)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"item_ids", [](auto* r) { SetInt64(r, "item_ids", {9}, std::vector<int64_t>(9)); },
       "item_ids: 9 candidates exceed server.max_candidates (8)"},
      {"user ids", [](auto* r) { SetInt64(r, "user_0", {5}, std::vector<int64_t>(5)); },
       "user_0: its contents hold 5 values, more than input 'user_0' can hold (4: "
       "server.max_ids_per_feature, for the one bag of a user-side table)"},
      {"item ids", [](auto* r) { SetInt64(r, "item_0", {11}, std::vector<int64_t>(11)); },
       "item_0: its contents hold 11 values, more than input 'item_0' can hold (10: "
       "server.max_ids_per_feature per candidate, server.max_candidates candidates, at most "
       "engine.max_batch_ids)"},
      {"user lengths",
       [](auto* r) {
         SetInt32(r, "user_1__lengths", {2}, {1, 1});
       },
       "user_1__lengths: its contents hold 2 values, more than input 'user_1__lengths' can hold "
       "(1: one bag: a user-side table)"},
      {"item weights", [](auto* r) { SetFp32(r, "item_1__weights", {11}, std::vector<float>(11)); },
       "(10: server.max_ids_per_feature per candidate"},
      {"user dense",
       [](auto* r) {
         SetFp32(r, "user_dense", {1, 3}, {1, 2, 3});
       },
       "user_dense: its contents hold 3 values, more than input 'user_dense' can hold (2: model "
       "'small' takes 2 user dense values)"},
      {"item dense", [](auto* r) { SetFp32(r, "item_dense", {25}, std::vector<float>(25)); },
       "(24: server.max_candidates rows of the 3 item dense values model 'small' takes)"},
      {"ids in all",
       [](auto* r) {
         SetInt64(r, "item_0", {8}, std::vector<int64_t>(8));  // user_0 3, user_1 2, item_0 8
       },
       "the request holds at least 13 ids in its contents, more than engine.max_batch_ids (10)"},
      {"bytes_contents",
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_bytes_contents(""); },
       "user_0: contents.bytes_contents holds 1 values, but input 'user_0' is INT64; send its "
       "values in contents.int64_contents"},
      {"values outside the datatype's field",
       [](auto* r) {
         for (int i = 0; i < 9; ++i) r->mutable_inputs(0)->mutable_contents()->add_fp64_contents(1);
       },
       "user_0: its contents hold 12 values, more than input 'user_0' can hold (4:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelInferRequest request = testing::GoodInferRequest();
    c.mutate(&request);
    ExpectRefused(request.SerializeAsString(), c.message);
    // Append refuses them too, later: the scan refuses nothing a valid request holds.
    engine::Batch batch;
    InferRequestInfo info;
    EXPECT_FALSE(decoder_.Append(request, model_, &batch, &info).ok());
  }
}

// Random requests assembled from pieces, some malformed: whenever protobuf parses them, the
// scan either counts exactly what parsing built or refuses for a bound; and it never
// refuses a request Append() accepts.
TEST_F(InferRequestScanTest, AgreesWithProtobufAndAppendOnRandomRequests) {
  std::mt19937_64 rng(20261206);
  const std::vector<std::string> names = {"user_0",   "user_1",     "item_0", "item_1__lengths",
                                          "item_ids", "user_dense", "nope",   ""};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int parsed_count = 0, accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    ModelInferRequest request = testing::GoodInferRequest();
    std::string bytes;
    const int pieces = pick(6);
    for (int p = 0; p < pieces; ++p) {
      switch (pick(7)) {
        case 0: {
          const std::string& name = names[pick(names.size())];
          SetInt64(&request, name.empty() ? "x" : name, {pick(3)}, std::vector<int64_t>(pick(12)));
          break;
        }
        case 1:
          (*request.mutable_parameters())[std::to_string(pick(80))].set_int64_param(pick(5));
          break;
        case 2:
          request.add_outputs()->set_name(pick(2) ? "scores" : "indices");
          break;
        case 3:
          bytes += Tag(50 + pick(40), 0) + Varint(pick(1000));
          break;
        case 4:
          bytes += Delimited(5, Delimited(1, names[pick(names.size())]) +
                                    Delimited(5, Tag(3, 2) + Varint(pick(3)) + "\x01\x02\x03"));
          break;
        case 5:
          request.add_raw_input_contents(std::string(pick(9), '\0'));
          break;
        case 6:
          if (!bytes.empty()) bytes.resize(bytes.size() - 1);  // often malformed
          break;
      }
    }
    const std::string wire = request.SerializeAsString() + bytes;
    InferRequestTop top;
    TensorDecoder::WireInputs scanned;
    const absl::Status top_status = ScanInferTop(wire, &top);
    InferRequestTop checked = top;
    absl::Status status =
        top_status.ok() ? decoder_.CheckWire(wire, &checked, &scanned) : top_status;
    ModelInferRequest parsed;
    if (!parsed.ParseFromString(wire)) continue;
    ++parsed_count;
    if (top_status.ok()) {
      EXPECT_EQ(top.inputs, parsed.inputs_size());
      EXPECT_EQ(top.outputs, parsed.outputs_size());
      EXPECT_EQ(top.raw_input_contents, parsed.raw_input_contents_size());
      EXPECT_EQ(top.model_name, parsed.model_name());
    }
    EXPECT_THAT(std::string(status.message()), ::testing::Not(HasSubstr("malformed")));
    engine::Batch batch;
    InferRequestInfo info;
    const absl::Status appended = decoder_.Append(parsed, model_, &batch, &info);
    const bool bound_only = absl::StrContains(status.message(), "parameters") ||
                            absl::StrContains(status.message(), "does not define");
    if (status.ok()) {  // the scan's resolved inputs stand for Append's own lookup
      engine::Batch again;
      const absl::Status with_scan = decoder_.Append(parsed, model_, &again, &info, &scanned);
      EXPECT_EQ(with_scan, appended);
      if (appended.ok()) testing::ExpectSameBatch(again, batch);
    }
    if (appended.ok() && parsed.outputs_size() <= 1 && !bound_only) {
      EXPECT_TRUE(status.ok()) << status << "\nwhile Append accepts it";
      accepted += status.ok();
    }
  }
  EXPECT_GT(parsed_count, 1000);
  EXPECT_GT(accepted, 50);
}

}  // namespace
}  // namespace fuserank::server

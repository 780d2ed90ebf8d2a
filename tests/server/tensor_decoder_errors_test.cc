// TensorDecoder's refusals: every bad input of SPEC section 3 and every shape, datatype
// and content error of a tensor is INVALID_ARGUMENT naming the tensor and leaves the batch
// as it was (the same reasons as RequestDecoder's: decoder_parity_test.cc).
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tensor_decoder.h"
#include "tests/server/infer_test_util.h"

namespace fuserank::server {
namespace {

using inference::ModelInferRequest;
using ::testing::HasSubstr;
using testing::RemoveInput;
using testing::SetFp32;
using testing::SetInt32;
using testing::SetInt64;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct BadCase {
  std::string name;
  bool raw;  // start from the raw_input_contents form of the good request
  std::function<void(ModelInferRequest*)> mutate;
  std::string message;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class TensorDecoderErrorTest : public ::testing::TestWithParam<BadCase> {
 protected:
  TensorDecoderErrorTest()
      : model_(testing::BuildInferTestModel()), decoder_(*model_, DecodeLimits{8, 4, 10}) {}

  std::shared_ptr<const engine::Model> model_;
  TensorDecoder decoder_;
};

TEST_P(TensorDecoderErrorTest, IsInvalidArgumentNamingTheTensorAndLeavesTheBatchAsItWas) {
  engine::Batch batch;
  InferRequestInfo info;
  const ModelInferRequest good = testing::GoodInferRequest();
  ASSERT_TRUE(decoder_.Append(good, model_, &batch, &info).ok());
  const engine::Batch before = batch;
  ModelInferRequest request =
      GetParam().raw
          ? bench::ToInferRequest(testing::InferTestModel().spec, testing::GoodRankRequest(),
                                  {bench::TensorContents::kRaw, true})
          : good;
  GetParam().mutate(&request);
  const absl::Status status = decoder_.Append(request, model_, &batch, &info);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().message));
  EXPECT_LT(status.message().size(), 1024u) << "client text is quoted cut short";
  testing::ExpectSameBatch(batch, before);
  // An empty batch stays empty, without a model.
  engine::Batch empty;
  EXPECT_FALSE(decoder_.Append(request, model_, &empty, &info).ok());
  EXPECT_EQ(empty.model, nullptr);
  EXPECT_EQ(empty.num_requests(), 0);
}

// The good request has 2 candidates; item_0 one id (bags 1, 0), item_1 three ids (2, 1)
// with weights, user_0 three ids with weights, user_1 two ids (9 in all); limits: 8
// candidates, 4 ids per bag, 10 ids per request.
std::vector<BadCase> BadCases() {
  auto item_ids_index = [](ModelInferRequest* r) {
    for (int i = 0; i < r->inputs_size(); ++i) {
      if (r->inputs(i).name() == "item_ids") return i;
    }
    return -1;
  };
  return {
      {"UnknownTable", false, [](auto* r) { SetInt64(r, "nope", {1}, {1}); },
       "nope: model 'small' has no table named 'nope' (user-side tables: user_0, user_1; "
       "item-side tables: item_0, item_1;"},
      {"UnknownNameQuotedCutShort", false,
       [](auto* r) { SetInt64(r, std::string(1 << 20, 'y') + "__weights", {1}, {1}); },
       "has no table named 'yyyyyyyy"},
      {"UnknownTableLengths", false, [](auto* r) { SetInt32(r, "nope__lengths", {1}, {0}); },
       "nope__lengths: model 'small' has no table named 'nope'"},
      {"InputGivenTwice", false, [](auto* r) { *r->add_inputs() = r->inputs(0); },
       "user_0: input 'user_0' is given twice (inputs[0] and inputs[13]); send each input once"},
      {"UserTableWithABagPerCandidate", false,
       [](auto* r) {
         SetInt32(r, "user_0__lengths", {2}, {2, 1});
       },
       "user_0__lengths: table 'user_0' is a user-side table; send one bag (shape [1]), got "
       "shape [2]"},
      {"ItemTableWithOneBag", false, [](auto* r) { SetInt32(r, "item_0__lengths", {1}, {1}); },
       "item_0__lengths: table 'item_0' is an item-side table; send one bag per candidate "
       "(shape [2], as item_ids), got shape [1]"},
      {"IdsWithoutLengths", false, [](auto* r) { RemoveInput(r, "item_0__lengths"); },
       "item_0: 1 ids but no input item_0__lengths"},
      {"LengthsNotTheIds", false,
       [](auto* r) {
         SetInt32(r, "item_0__lengths", {2}, {1, 1});
       },
       "item_0__lengths: the bags hold 2 ids in all, but item_0 has 1"},
      {"NegativeLength", false,
       [](auto* r) {
         SetInt32(r, "item_0__lengths", {2}, {-1, 2});
       },
       "item_0__lengths[0]: -1 is no bag length"},
      {"TooManyIdsInABag", false,
       [](auto* r) {
         SetInt64(r, "item_0", {5}, {1, 2, 3, 4, 5});
         SetInt32(r, "item_0__lengths", {2}, {0, 5});
       },
       "item_0__lengths[1]: 5 ids for table 'item_0' exceed server.max_ids_per_feature (4)"},
      {"MoreIdsThanMaxBatchIds", false,
       [](auto* r) {
         SetInt64(r, "item_0", {3}, {1, 2, 3});
         SetInt32(r, "item_0__lengths", {2}, {1, 2});
       },
       "the request holds 11 ids, more than engine.max_batch_ids (10)"},
      {"WeightsNotOnePerId", false,
       [](auto* r) {
         SetFp32(r, "item_1__weights", {2}, {1, 1});
       },
       "item_1__weights: 2 weights for 3 ids of table 'item_1'; send one weight per id, or none"},
      {"WeightsWithoutIds", false,
       [](auto* r) {
         SetFp32(r, "item_0__weights", {2}, {1, 1});
       },
       "item_0__weights: 2 weights for 1 ids of table 'item_0'"},
      {"ValuesOutsideTheDatatypesField", false,
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); },
       "user_0: contents holds 1 values outside contents.int64_contents, the only field "
       "datatype INT64 reads; leave the others empty"},
      // Every value in a field the datatype does not read (int_contents for INT64, the
      // common slip): the wrong field is named, not a count of 0 in the right one.
      {"ValuesOnlyInTheWrongField", false,
       [](auto* r) {
         auto* contents = r->mutable_inputs(0)->mutable_contents();
         for (int64_t v : contents->int64_contents()) {
           contents->add_int_contents(static_cast<int32_t>(v));
         }
         contents->clear_int64_contents();
       },
       "values outside contents.int64_contents, the only field datatype INT64 reads"},
      {"NaNWeight", false,
       [](auto* r) {
         SetFp32(r, "item_1__weights", {3}, {1, kNaN, 1});
       },
       "item_1__weights[1]: must be a finite number, got nan"},
      {"InfWeight", false,
       [](auto* r) {
         SetFp32(r, "user_0__weights", {3}, {1, 1, -kInf});
       },
       "user_0__weights[2]: must be a finite number, got -inf"},
      {"UserDenseOfTheWrongLength", false,
       [](auto* r) {
         SetFp32(r, "user_dense", {1, 3}, {1, 2, 3});
       },
       "user_dense: model 'small' takes 2 user dense values, got 3"},
      {"UserDenseOfTwoRows", false,
       [](auto* r) {
         SetFp32(r, "user_dense", {2, 2}, {1, 2, 3, 4});
       },
       "user_dense: shape [2, 2]: send one row (shape [1, 2])"},
      {"UserDenseMissing", false, [](auto* r) { RemoveInput(r, "user_dense"); },
       "user_dense: model 'small' takes 2 user dense values, got 0"},
      {"NaNUserDense", false,
       [](auto* r) {
         SetFp32(r, "user_dense", {1, 2}, {1, kNaN});
       },
       "user_dense[1]: must be a finite number, got nan"},
      {"ItemDenseOfTheWrongWidth", false,
       [](auto* r) {
         SetFp32(r, "item_dense", {2, 2}, {1, 2, 3, 4});
       },
       "item_dense: model 'small' takes 3 item dense values, got 2"},
      {"ItemDenseNotOneRowPerCandidate", false,
       [](auto* r) {
         SetFp32(r, "item_dense", {1, 3}, {1, 2, 3});
       },
       "item_dense: shape [1, 3]: send one row per candidate (shape [2, 3], as item_ids)"},
      {"ItemDenseMissing", false, [](auto* r) { RemoveInput(r, "item_dense"); },
       "item_dense: model 'small' takes 3 item dense values, got 0"},
      {"InfItemDense", false,
       [](auto* r) {
         SetFp32(r, "item_dense", {2, 3}, {1, 2, 3, 4, 5, kInf});
       },
       "item_dense[1, 2]: must be a finite number, got inf"},
      {"MoreCandidatesThanTheLimit", false,
       [](auto* r) {
         SetInt64(r, "item_ids", {9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
       },
       "item_ids: 9 candidates exceed server.max_candidates (8)"},
      {"OutOfRangeIdOfARejectTable", false,
       [](auto* r) {
         SetInt64(r, "item_1", {3}, {9, 10, 4});
       },
       "item_1[1]: id 10 is out of range for table 'item_1' (10 rows: ids 0..9; oov: reject)"},
      {"NegativeIdOfARejectTable", false,
       [](auto* r) {
         SetInt64(r, "user_1", {2}, {-3, 4});
       },
       "user_1[0]: id -3 is out of range for table 'user_1' (50 rows: ids 0..49; oov: reject)"},
      {"ItemIdsMissing", false, [](auto* r) { RemoveInput(r, "item_ids"); },
       "item_ids: missing; send the candidates' item ids (INT64 [N]"},
      {"WrongDatatype", false, [](auto* r) { SetFp32(r, "item_0", {1}, {5}); },
       "item_0: datatype 'FP32', expected INT64"},
      {"WrongRank", false,
       [](auto* r) {
         SetInt64(r, "item_ids", {1, 2}, {1000, 1001});
       },
       "item_ids: shape [1, 2] has 2 dimensions, expected 1"},
      {"NegativeDimension", false, [](auto* r) { SetInt64(r, "item_0", {-1}, {}); },
       "item_0: shape [-1] has a negative dimension"},
      {"TypedContentsNotTheShape", false,
       [](auto* r) {
         SetInt64(r, "item_ids", {3}, {1000, 1001});
       },
       "item_ids: shape [3] holds 3 INT64 elements, contents.int64_contents has 2"},
      {"TopKNegative", false,
       [](auto* r) { (*r->mutable_parameters())["top_k"].set_int64_param(-1); },
       "parameters.top_k: must be an int64 parameter >= 0"},
      {"TopKNotAnInteger", false,
       [](auto* r) { (*r->mutable_parameters())["top_k"].set_string_param("5"); },
       "parameters.top_k: must be an int64 parameter >= 0"},
      {"RawBytesNotTheShape", true,
       [item_ids_index](auto* r) { r->mutable_raw_input_contents(item_ids_index(r))->resize(12); },
       "item_ids: shape [2] holds 2 INT64 elements (16 bytes), raw_input_contents[12] has 12 "
       "bytes"},
      {"RawEntriesNotOnePerInput", true,
       [](auto* r) { *r->add_raw_input_contents() = std::string(1, 'x'); },
       "raw_input_contents: 14 entries for 13 inputs"},
      {"RawAndTypedContentsMixed", true,
       [](auto* r) { r->mutable_inputs(0)->mutable_contents()->add_int64_contents(1); },
       "user_0: has contents while the request uses raw_input_contents"},
      // The name is the client's and not checked yet: escaped in the message.
      {"RawAndTypedContentsMixedUnderAnUnknownName", true,
       [](auto* r) {
         r->mutable_inputs(0)->set_name("bad\x01name\xff");
         r->mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
       },
       "bad\\x01name\\xff: has contents while the request uses raw_input_contents"},
  };
}

INSTANTIATE_TEST_SUITE_P(EveryBadInput, TensorDecoderErrorTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace fuserank::server

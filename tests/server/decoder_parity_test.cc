// RequestDecoder and TensorDecoder side by side: the same mistake made in a RankRequest
// and in its KServe v2 twin gets the same reason, and both name the model by the name it
// is served under.
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/request_decoder.h"
#include "server/tensor_decoder.h"
#include "tests/server/infer_test_util.h"

namespace fuserank::server {
namespace {

using inference::ModelInferRequest;
using ::testing::HasSubstr;
using testing::SetFp32;
using testing::SetInt32;
using testing::SetInt64;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The same mistake made in a RankRequest and in its v2 twin (one candidate, so a bag is a
// table's whole tensor) gets the same reason: the message after its location.
struct ParityCase {
  std::string name;
  std::function<void(v1::RankRequest*)> rank;
  std::function<void(ModelInferRequest*)> infer;
  std::string common;  // empty: the reasons are equal; else both messages contain it
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.name; }

class TensorDecoderParityTest : public ::testing::TestWithParam<ParityCase> {};

absl::string_view Reason(absl::string_view message) {
  const size_t colon = message.find(": ");
  return colon == absl::string_view::npos ? message : message.substr(colon + 2);
}

TEST_P(TensorDecoderParityTest, GivesTheReasonRankGives) {
  const std::shared_ptr<const engine::Model> model = testing::BuildInferTestModel();
  const RequestDecoder rank_decoder(model, DecodeLimits{8, 4});
  const TensorDecoder infer_decoder(*model, DecodeLimits{8, 4});
  v1::RankRequest rank = testing::GoodRankRequest();
  rank.mutable_candidates()->RemoveLast();
  ModelInferRequest infer = bench::ToInferRequest(testing::InferTestModel().spec, rank,
                                                  {bench::TensorContents::kTyped, true});
  GetParam().rank(&rank);
  GetParam().infer(&infer);
  engine::Batch a;
  engine::Batch b;
  InferRequestInfo info;
  const absl::Status from_rank = rank_decoder.Append(rank, &a);
  const absl::Status from_infer = infer_decoder.Append(infer, model, &b, &info);
  ASSERT_EQ(from_rank.code(), absl::StatusCode::kInvalidArgument) << from_rank;
  ASSERT_EQ(from_infer.code(), absl::StatusCode::kInvalidArgument) << from_infer;
  if (GetParam().common.empty()) {
    EXPECT_EQ(Reason(from_rank.message()), Reason(from_infer.message()))
        << "Rank: " << from_rank << "\nModelInfer: " << from_infer;
  } else {
    EXPECT_THAT(std::string(from_rank.message()), HasSubstr(GetParam().common));
    EXPECT_THAT(std::string(from_infer.message()), HasSubstr(GetParam().common));
  }
}

v1::Feature* Find(google::protobuf::RepeatedPtrField<v1::Feature>* features,
                  const std::string& name) {
  for (v1::Feature& f : *features) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

v1::Feature* Item(v1::RankRequest* r, const std::string& name) {
  return Find(r->mutable_candidates(0)->mutable_features(), name);
}

std::vector<ParityCase> ParityCases() {
  return {
      {"UnknownTable", [](auto* r) { r->add_user_features()->set_name("nope"); },
       [](auto* r) { SetInt64(r, "nope", {0}, {}); },
       "model 'small' has no table named 'nope' (user-side tables: user_0, user_1"},
      {"ItemTableOnTheUserSide", [](auto* r) { r->add_user_features()->set_name("item_0"); },
       [](auto* r) {
         SetInt32(r, "item_0__lengths", {2}, {0, 0});
       },
       "table 'item_0' is an item-side table; send "},
      {"TableTwice", [](auto* r) { *r->add_user_features() = r->user_features(0); },
       [](auto* r) { *r->add_inputs() = r->inputs(0); }, "is given twice"},
      {"WeightsNotOnePerId", [](auto* r) { Item(r, "item_1")->mutable_weights()->RemoveLast(); },
       [](auto* r) { SetFp32(r, "item_1__weights", {1}, {0.25f}); }, ""},
      {"NaNWeight", [](auto* r) { Item(r, "item_1")->set_weights(1, kNaN); },
       [](auto* r) {
         SetFp32(r, "item_1__weights", {2}, {0.25f, kNaN});
       },
       ""},
      {"UserDenseLength", [](auto* r) { r->add_user_dense(3); },
       [](auto* r) {
         SetFp32(r, "user_dense", {1, 3}, {1, -2, 3});
       },
       ""},
      {"ItemDenseLength", [](auto* r) { r->mutable_candidates(0)->mutable_dense()->RemoveLast(); },
       [](auto* r) {
         SetFp32(r, "item_dense", {1, 2}, {0.1f, 0.2f});
       },
       ""},
      {"InfDense", [](auto* r) { r->set_user_dense(1, kInf); },
       [](auto* r) {
         SetFp32(r, "user_dense", {1, 2}, {1, kInf});
       },
       ""},
      {"IdsPerFeatureLimit",
       [](auto* r) {
         for (int i = 0; i < 4; ++i) Item(r, "item_0")->add_ids(i);
       },
       [](auto* r) {
         SetInt64(r, "item_0", {5}, {5, 0, 1, 2, 3});
         SetInt32(r, "item_0__lengths", {1}, {5});
       },
       ""},
      {"CandidatesLimit",
       [](auto* r) {
         for (int i = 0; i < 8; ++i) *r->add_candidates() = r->candidates(0);
       },
       [](auto* r) {
         SetInt64(r, "item_ids", {9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
       },
       ""},
      {"OutOfRangeId", [](auto* r) { Item(r, "item_1")->set_ids(1, 10); },
       [](auto* r) {
         SetInt64(r, "item_1", {2}, {9, 10});
       },
       ""},
  };
}

// A model served under a name of its own (models[].name) is named so in every message,
// not by its spec's name ('small'): that is the name the client addressed.
TEST(DecoderMessagesTest, NameTheModelByTheNameItIsServedUnder) {
  const std::shared_ptr<const engine::Model> model = testing::BuildInferTestModel();
  const RequestDecoder rank_decoder(model, DecodeLimits{8, 4}, "ctr");
  const TensorDecoder infer_decoder(*model, DecodeLimits{8, 4}, "ctr");
  EXPECT_EQ(rank_decoder.model_name(), "ctr");
  EXPECT_EQ(rank_decoder.scan_limits().model_name, "ctr");  // the wire scan's messages
  EXPECT_EQ(RequestDecoder(model, DecodeLimits{8, 4}).model_name(), "small");

  v1::RankRequest rank = testing::GoodRankRequest();
  rank.add_user_features()->set_name("nope");
  engine::Batch batch;
  absl::Status status = rank_decoder.Append(rank, &batch);
  EXPECT_THAT(std::string(status.message()), HasSubstr("model 'ctr' has no table named 'nope'"));
  rank = testing::GoodRankRequest();
  rank.add_user_dense(1.0f);
  status = rank_decoder.Append(rank, &batch);
  EXPECT_THAT(std::string(status.message()), HasSubstr("user_dense: model 'ctr' takes 2"));

  ModelInferRequest infer = testing::GoodInferRequest();
  SetInt64(&infer, "nope", {1}, {1});
  InferRequestInfo info;
  status = infer_decoder.Append(infer, model, &batch, &info);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("nope: model 'ctr' has no table named 'nope'"));
  infer = testing::GoodInferRequest();
  SetFp32(&infer, "item_dense", {2, 2}, {1, 2, 3, 4});
  status = infer_decoder.Append(infer, model, &batch, &info);
  EXPECT_THAT(std::string(status.message()), HasSubstr("item_dense: model 'ctr' takes 3"));
  for (int i = 0; i < 20; ++i) infer.add_inputs();
  InferRequestTop top;
  const std::string wire = infer.SerializeAsString();
  ASSERT_TRUE(ScanInferTop(wire, &top).ok());
  status = infer_decoder.CheckWire(wire, &top);
  EXPECT_THAT(std::string(status.message()), HasSubstr("input tensors, but model 'ctr' takes"));
}

INSTANTIATE_TEST_SUITE_P(SectionThreeRows, TensorDecoderParityTest,
                         ::testing::ValuesIn(ParityCases()),
                         [](const ::testing::TestParamInfo<ParityCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace fuserank::server

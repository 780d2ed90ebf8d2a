#include "server/request_decoder.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using fuserank::testing::AddFeature;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// user_0 (100 rows), user_1 (50 rows, oov: reject), item_0 (100 rows),
// item_1 (10 rows, oov: reject, mean pooling); dense {user: 2, item: 3}.
std::shared_ptr<const engine::Model> DecoderModel() {
  engine::ModelSpec spec = fuserank::testing::SmallSpec(2, 2, 100, 4);
  spec.tables[1].rows = 50;
  spec.tables[1].oov = engine::Oov::kReject;
  spec.tables[3].rows = 10;
  spec.tables[3].oov = engine::Oov::kReject;
  spec.tables[3].pooling = engine::Pooling::kMean;
  auto model = fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, 1));
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// Two candidates; every kind of bag: multi-hot, weighted, out-of-order, missing.
v1::RankRequest GoodRequest() {
  v1::RankRequest request;
  // user_1 first: bags must come out in the model's table order regardless.
  AddFeature(request.mutable_user_features(), "user_1", {3, 49});
  AddFeature(request.mutable_user_features(), "user_0", {7, 107, -1}, {0.5f, 2.0f, 1.0f});
  request.add_user_dense(1.0f);
  request.add_user_dense(-2.0f);
  v1::Candidate* c0 = request.add_candidates();
  c0->set_item_id(1000);
  AddFeature(c0->mutable_features(), "item_0", {5});
  AddFeature(c0->mutable_features(), "item_1", {9, 0}, {0.25f, 0.75f});
  for (float d : {0.1f, 0.2f, 0.3f}) c0->add_dense(d);
  v1::Candidate* c1 = request.add_candidates();
  c1->set_item_id(1001);
  AddFeature(c1->mutable_features(), "item_1", {4});  // item_0 missing: empty bag
  for (float d : {0.4f, 0.5f, 0.6f}) c1->add_dense(d);
  return request;
}

class RequestDecoderTest : public ::testing::Test {
 protected:
  RequestDecoderTest() : model_(DecoderModel()), decoder_(model_, DecodeLimits{8, 4}) {}

  std::shared_ptr<const engine::Model> model_;
  RequestDecoder decoder_;
};

TEST_F(RequestDecoderTest, DecodesMultiHotWeightedAndMissingBagsInTableOrder) {
  engine::Batch batch;
  ASSERT_TRUE(decoder_.Append(GoodRequest(), &batch).ok());
  EXPECT_EQ(batch.model, model_);
  EXPECT_EQ(batch.num_requests(), 1);
  EXPECT_EQ(batch.num_candidates(), 2);
  EXPECT_THAT(batch.top_k, ElementsAre(2u));
  // User bags: user_0 then user_1; ids mapped modulo 100 (107 -> 7, -1 -> 99).
  EXPECT_THAT(batch.user.bag_begin, ElementsAre(0u, 3u, 5u));
  EXPECT_THAT(batch.user.rows, ElementsAre(7, 7, 99, 3, 49));
  EXPECT_THAT(batch.user.weights, ElementsAre(0.5f, 2.0f, 1.0f, 1.0f, 1.0f));
  // Item bags: (c0, item_0), (c0, item_1), (c1, item_0) empty, (c1, item_1).
  EXPECT_THAT(batch.item.bag_begin, ElementsAre(0u, 1u, 3u, 3u, 4u));
  EXPECT_THAT(batch.item.rows, ElementsAre(5, 9, 0, 4));
  EXPECT_THAT(batch.item.weights, ElementsAre(1.0f, 0.25f, 0.75f, 1.0f));
  EXPECT_THAT(batch.user_dense, ElementsAre(1.0f, -2.0f));
  EXPECT_THAT(batch.item_dense, ElementsAre(0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f));
}

TEST_F(RequestDecoderTest, AppendsASecondRequestAfterTheFirst) {
  engine::Batch batch;
  ASSERT_TRUE(decoder_.Append(GoodRequest(), &batch).ok());
  v1::RankRequest second = GoodRequest();
  second.set_top_k(1);
  second.mutable_candidates()->RemoveLast();
  ASSERT_TRUE(decoder_.Append(second, &batch).ok());
  EXPECT_EQ(batch.num_requests(), 2);
  EXPECT_THAT(batch.candidate_begin, ElementsAre(0u, 2u, 3u));
  EXPECT_THAT(batch.top_k, ElementsAre(2u, 1u));
  EXPECT_EQ(batch.user.num_bags(), 4u);
  EXPECT_EQ(batch.item.num_bags(), 6u);
  EXPECT_THAT(batch.user.bag_begin, ElementsAre(0u, 3u, 5u, 8u, 10u));
  EXPECT_EQ(batch.user_dense.size(), 4u);
  EXPECT_EQ(batch.item_dense.size(), 9u);
}

TEST_F(RequestDecoderTest, TopKZeroOrTooLargeMeansAll) {
  for (uint32_t top_k : {0u, 2u, 3u, 1000u}) {
    engine::Batch batch;
    v1::RankRequest request = GoodRequest();
    request.set_top_k(top_k);
    ASSERT_TRUE(decoder_.Append(request, &batch).ok());
    EXPECT_THAT(batch.top_k, ElementsAre(2u)) << "top_k " << top_k;
  }
  engine::Batch batch;
  v1::RankRequest request = GoodRequest();
  request.set_top_k(1);
  ASSERT_TRUE(decoder_.Append(request, &batch).ok());
  EXPECT_THAT(batch.top_k, ElementsAre(1u));
}

TEST_F(RequestDecoderTest, NoCandidatesIsARequestWithNoCandidates) {
  v1::RankRequest request = GoodRequest();
  request.clear_candidates();
  engine::Batch batch;
  ASSERT_TRUE(decoder_.Append(request, &batch).ok());
  EXPECT_EQ(batch.num_candidates(), 0);
  EXPECT_THAT(batch.top_k, ElementsAre(0u));
}

// The client's name is quoted cut short, not copied whole into the status (a 1 MB name
// made a 1 MB message before gRPC's own cut).
TEST_F(RequestDecoderTest, AnUnknownNameIsQuotedCutShort) {
  v1::RankRequest request = GoodRequest();
  request.mutable_user_features(0)->set_name(std::string(1 << 20, 'x'));
  engine::Batch batch;
  const absl::Status status = decoder_.Append(request, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("has no table named 'xxx"));
  EXPECT_LT(status.message().size(), 1024u);
}

TEST_F(RequestDecoderTest, ABatchOfAnotherModelIsAnInternalError) {
  engine::Batch batch;
  batch.model = DecoderModel();
  EXPECT_EQ(decoder_.Append(GoodRequest(), &batch).code(), absl::StatusCode::kInternal);
}

struct BadRequestCase {
  std::string name;
  std::function<void(v1::RankRequest*)> mutate;
  std::string message;
};

void PrintTo(const BadRequestCase& c, std::ostream* os) { *os << c.name; }

class BadRequestTest : public RequestDecoderTest,
                       public ::testing::WithParamInterface<BadRequestCase> {};

TEST_P(BadRequestTest, IsInvalidArgumentAndLeavesTheBatchAsItWas) {
  engine::Batch batch;
  ASSERT_TRUE(decoder_.Append(GoodRequest(), &batch).ok());
  const engine::Batch before = batch;
  v1::RankRequest request = GoodRequest();
  GetParam().mutate(&request);
  const absl::Status status = decoder_.Append(request, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().message));
  EXPECT_EQ(batch.candidate_begin, before.candidate_begin);
  EXPECT_EQ(batch.top_k, before.top_k);
  EXPECT_EQ(batch.user.bag_begin, before.user.bag_begin);
  EXPECT_EQ(batch.user.rows, before.user.rows);
  EXPECT_EQ(batch.user.weights, before.user.weights);
  EXPECT_EQ(batch.item.bag_begin, before.item.bag_begin);
  EXPECT_EQ(batch.item.rows, before.item.rows);
  EXPECT_EQ(batch.item.weights, before.item.weights);
  EXPECT_EQ(batch.user_dense, before.user_dense);
  EXPECT_EQ(batch.item_dense, before.item_dense);
  // The decoder still works after a refusal.
  EXPECT_TRUE(decoder_.Append(GoodRequest(), &batch).ok());
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    SpecRows, BadRequestTest,
    ::testing::Values(
        BadRequestCase{
            "no_such_table",
            [](v1::RankRequest* r) { AddFeature(r->mutable_user_features(), "country", {1}); },
            "user_features[2]: model 'small' has no table named 'country' "
            "(user-side tables: user_0, user_1)"},
        BadRequestCase{"item_table_in_user_features",
                       [](v1::RankRequest* r) { r->mutable_user_features(0)->set_name("item_0"); },
                       "user_features[0]: table 'item_0' is an item-side table; send it in each "
                       "candidate's features"},
        BadRequestCase{"user_table_in_candidate",
                       [](v1::RankRequest* r) {
                         AddFeature(r->mutable_candidates(1)->mutable_features(), "user_0", {1});
                       },
                       "candidates[1].features[1]: table 'user_0' is a user-side table; send it "
                       "in user_features"},
        BadRequestCase{
            "same_table_twice_user",
            [](v1::RankRequest* r) { AddFeature(r->mutable_user_features(), "user_1", {1}); },
            "user_features[2]: table 'user_1' is given twice (also at "
            "user_features[0])"},
        BadRequestCase{"same_table_twice_item",
                       [](v1::RankRequest* r) {
                         AddFeature(r->mutable_candidates(0)->mutable_features(), "item_0", {1});
                       },
                       "candidates[0].features[2]: table 'item_0' is given twice"},
        BadRequestCase{"weights_not_one_per_id",
                       [](v1::RankRequest* r) { r->mutable_user_features(1)->add_weights(1.0f); },
                       "user_features[1]: 4 weights for 3 ids of table 'user_0'; send one weight "
                       "per id, or none"},
        BadRequestCase{"user_dense_short",
                       [](v1::RankRequest* r) { r->mutable_user_dense()->RemoveLast(); },
                       "user_dense: model 'small' takes 2 user dense values, got 1"},
        BadRequestCase{"item_dense_long",
                       [](v1::RankRequest* r) { r->mutable_candidates(1)->add_dense(1.0f); },
                       "candidates[1].dense: model 'small' takes 3 item dense values, got 4"},
        BadRequestCase{"nan_user_dense", [](v1::RankRequest* r) { r->set_user_dense(1, kNaN); },
                       "user_dense[1]: must be a finite number, got nan"},
        BadRequestCase{"inf_item_dense",
                       [](v1::RankRequest* r) { r->mutable_candidates(0)->set_dense(2, -kInf); },
                       "candidates[0].dense[2]: must be a finite number, got -inf"},
        BadRequestCase{"nan_weight",
                       [](v1::RankRequest* r) {
                         r->mutable_candidates(0)->mutable_features(1)->set_weights(1, kNaN);
                       },
                       "candidates[0].features[1].weights[1]: must be a finite number, got nan"},
        BadRequestCase{
            "inf_user_weight",
            [](v1::RankRequest* r) { r->mutable_user_features(1)->set_weights(0, kInf); },
            "user_features[1].weights[0]: must be a finite number, got inf"},
        BadRequestCase{"too_many_candidates",
                       [](v1::RankRequest* r) {
                         while (r->candidates_size() < 9) *r->add_candidates() = r->candidates(0);
                       },
                       "candidates: 9 candidates exceed server.max_candidates (8)"},
        BadRequestCase{"too_many_ids",
                       [](v1::RankRequest* r) {
                         for (int i = 0; i < 3; ++i) r->mutable_user_features(0)->add_ids(i);
                       },
                       "user_features[0]: 5 ids for table 'user_1' exceed "
                       "server.max_ids_per_feature (4)"},
        BadRequestCase{"out_of_range_user_id_reject",
                       [](v1::RankRequest* r) { r->mutable_user_features(0)->set_ids(1, 50); },
                       "user_features[0].ids[1]: id 50 is out of range for table 'user_1' (50 "
                       "rows: ids 0..49; oov: reject)"},
        BadRequestCase{"negative_item_id_reject",
                       [](v1::RankRequest* r) {
                         r->mutable_candidates(1)->mutable_features(0)->set_ids(0, -3);
                       },
                       "candidates[1].features[0].ids[0]: id -3 is out of range for table "
                       "'item_1' (10 rows"}),
    [](const ::testing::TestParamInfo<BadRequestCase>& info) { return info.param.name; });

}  // namespace
}  // namespace fuserank::server

namespace fuserank::server {
namespace {

// engine.max_batch_ids bounds one request's ids; the wire scan refuses such requests before
// parsing (request_scan_test.cc), this is the decoder's own check behind it.
TEST(RequestDecoderLimitsTest, MoreIdsInAllThanMaxBatchIdsIsRefusedAndLeavesTheBatch) {
  const std::shared_ptr<const engine::Model> model = DecoderModel();
  DecodeLimits limits;
  limits.max_candidates = 8;
  limits.max_ids_per_feature = 4;
  limits.max_ids = 7;  // GoodRequest holds 5 user + 4 item ids
  const RequestDecoder decoder(model, limits);
  engine::Batch batch;
  v1::RankRequest small = GoodRequest();
  small.mutable_candidates()->RemoveLast();  // 8 ids: still one over
  small.mutable_user_features(0)->mutable_ids()->RemoveLast();
  small.mutable_user_features(1)->mutable_ids()->RemoveLast();
  small.mutable_user_features(1)->mutable_weights()->RemoveLast();
  ASSERT_TRUE(decoder.Append(small, &batch).ok()) << "6 ids";
  const engine::Batch before = batch;
  const absl::Status status = decoder.Append(GoodRequest(), &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the request holds 9 ids, more than engine.max_batch_ids (7)"));
  EXPECT_EQ(batch.user.rows, before.user.rows);
  EXPECT_EQ(batch.item.rows, before.item.rows);
  EXPECT_EQ(batch.candidate_begin, before.candidate_begin);
  // The scan limits mirror the decoder's, with the model's table counts.
  EXPECT_EQ(decoder.scan_limits().max_ids, 7);
  EXPECT_EQ(decoder.scan_limits().user_tables, 2);
  EXPECT_EQ(decoder.scan_limits().item_tables, 2);
  EXPECT_EQ(decoder.scan_limits().model_name, "small");
}

}  // namespace
}  // namespace fuserank::server

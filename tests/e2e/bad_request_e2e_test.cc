// Every bad request of SPEC section 3 (but queue-full, deadline and admin token) against
// the real server in-process on 127.0.0.1:0: its status code and message, and the server
// scoring the next good request right. The fixture is ranker_e2e_util.h.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/ranker_e2e_util.h"
#include "tests/e2e/reference_util.h"

namespace fuserank::testing {
namespace {

using ::testing::HasSubstr;

struct BadCase {
  std::string name;
  std::function<void(v1::RankRequest*)> mutate;
  grpc::StatusCode code;
  std::vector<std::string> message_parts;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadRequestE2eTest : public RankerE2eTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadRequestE2eTest, GetsItsStatusAndMessageAndTheServerKeepsScoring) {
  v1::RankRequest request = GoodDotRequest();
  GetParam().mutate(&request);
  const Reply bad = Rank(stub_.get(), request);
  EXPECT_EQ(bad.status.error_code(), GetParam().code) << bad.status.error_message();
  for (const std::string& part : GetParam().message_parts) {
    EXPECT_THAT(bad.status.error_message(), HasSubstr(part));
  }
  const v1::RankRequest good = GoodDotRequest();
  ExpectMatchesReference(Model("dot32"), good, Rank(stub_.get(), good));
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;

INSTANTIATE_TEST_SUITE_P(
    SpecSection3, BadRequestE2eTest,
    ::testing::Values(
        BadCase{"feature_that_is_no_table",
                [](v1::RankRequest* r) { AddFeature(r->mutable_user_features(), "nope", {1}); },
                kInvalid,
                {"user_features[2]", "no table named 'nope'", "user_a, user_b"}},
        BadCase{"user_table_among_candidate_features",
                [](v1::RankRequest* r) {
                  AddFeature(r->mutable_candidates(1)->mutable_features(), "user_a", {1});
                },
                kInvalid,
                {"candidates[1].features[3]: table 'user_a' is a user-side table; send it in "
                 "user_features"}},
        BadCase{"item_table_among_user_features",
                [](v1::RankRequest* r) { AddFeature(r->mutable_user_features(), "item_b", {1}); },
                kInvalid,
                {"user_features[2]: table 'item_b' is an item-side table"}},
        BadCase{"same_name_twice",
                [](v1::RankRequest* r) {
                  AddFeature(r->mutable_candidates(2)->mutable_features(), "item_a", {1});
                },
                kInvalid,
                {"candidates[2].features[3]: table 'item_a' is given twice"}},
        BadCase{"weights_not_one_per_id",
                [](v1::RankRequest* r) {
                  r->mutable_candidates(0)->mutable_features(1)->add_weights(1.0f);
                },
                kInvalid,
                {"candidates[0].features[1]: 3 weights for 2 ids", "one weight per id"}},
        BadCase{"dense_of_the_wrong_length",
                [](v1::RankRequest* r) { r->mutable_candidates(2)->mutable_dense()->RemoveLast(); },
                kInvalid,
                {"candidates[2].dense: model 'dot32' takes 2 item dense values, got 1"}},
        BadCase{"user_dense_of_the_wrong_length",
                [](v1::RankRequest* r) { r->add_user_dense(1.0f); },
                kInvalid,
                {"user_dense: model 'dot32' takes 3 user dense values, got 4"}},
        BadCase{"nan_in_dense",
                [](v1::RankRequest* r) { r->set_user_dense(0, kNaN); },
                kInvalid,
                {"user_dense[0]: must be a finite number, got nan"}},
        BadCase{"inf_in_weights",
                [](v1::RankRequest* r) {
                  r->mutable_candidates(1)->mutable_features(1)->set_weights(0, kInf);
                },
                kInvalid,
                {"candidates[1].features[1].weights[0]: must be a finite number, got inf"}},
        BadCase{"more_candidates_than_the_limit",
                [](v1::RankRequest* r) {
                  while (r->candidates_size() < 65) *r->add_candidates() = r->candidates(0);
                },
                kInvalid,
                {"65 candidates exceed server.max_candidates (64)"}},
        BadCase{"more_ids_than_the_limit",
                [](v1::RankRequest* r) {
                  for (int i = 0; i < 7; ++i) r->mutable_user_features(0)->add_ids(i);
                },
                kInvalid,
                {"user_features[0]: 9 ids for table 'user_a' exceed server.max_ids_per_feature "
                 "(8)"}},
        BadCase{"more_bytes_than_the_limit",
                [](v1::RankRequest* r) { r->set_request_id(std::string(70000, 'x')); },
                kInvalid,
                {"more than server.max_request_bytes (65536)"}},
        // Over twice the limit gRPC itself used to answer RESOURCE_EXHAUSTED ("retry").
        BadCase{"far_more_bytes_than_the_limit",
                [](v1::RankRequest* r) { r->set_request_id(std::string(300000, 'x')); },
                kInvalid,
                {"more than server.max_request_bytes (65536)"}},
        // Refused on the wire, before parsing builds them.
        BadCase{"far_more_features_than_item_tables",
                [](v1::RankRequest* r) {
                  for (int i = 0; i < 30; ++i) r->mutable_candidates(1)->add_features();
                },
                kInvalid,
                {"candidates[1].features: more than 19 features, but model 'dot32' has 3 "
                 "item-side tables"}},
        BadCase{"far_more_user_features_than_user_tables",
                [](v1::RankRequest* r) {
                  for (int i = 0; i < 30; ++i) r->add_user_features();
                },
                kInvalid,
                {"user_features: more than 18 features, but model 'dot32' has 2 user-side "
                 "tables"}},
        BadCase{"out_of_range_id_in_a_reject_table",
                [](v1::RankRequest* r) { r->mutable_user_features(1)->set_ids(0, 50); },
                kInvalid,
                {"user_features[1].ids[0]: id 50 is out of range for table 'user_b' (50 rows"}},
        BadCase{"negative_id_in_a_reject_table",
                [](v1::RankRequest* r) {
                  r->mutable_candidates(0)->mutable_features(2)->set_ids(0, -1);
                },
                kInvalid,
                {"id -1 is out of range for table 'item_c' (30 rows"}},
        BadCase{"model_not_loaded",
                [](v1::RankRequest* r) { r->set_model("ghost"); },
                grpc::StatusCode::NOT_FOUND,
                {"model 'ghost' is not loaded; loaded models: dot32, concat16, linear_bf16, "
                 "nodense"}}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace fuserank::testing

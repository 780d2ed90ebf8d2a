// The real server in-process on 127.0.0.1:0, called over gRPC: scores against the
// double-precision reference, top-K order, every bad request of SPEC section 3 (but
// queue-full, deadline and admin token), health, reflection, admin, metrics.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using engine::Interaction;
using engine::ModelSpec;
using engine::Side;
using testing::ExpectMatchesReference;
using ::testing::HasSubstr;
using testing::Rank;
using testing::Reply;
using testing::TempDir;
using testing::TestModel;

ModelSpec Spec(const std::string& name, Interaction interaction, engine::DType dtype) {
  ModelSpec spec;
  spec.name = name;
  spec.version = absl::StrCat(name, "-v3");
  spec.weights_path = name + ".safetensors";
  spec.interaction = interaction;
  spec.embedding_dtype = dtype;
  return spec;
}

engine::TableSpec Table(const std::string& name, Side side, int64_t rows, int dim,
                        engine::Pooling pooling = engine::Pooling::kSum,
                        engine::Oov oov = engine::Oov::kModulo) {
  return {name, side, rows, dim, pooling, oov};
}

// Six models no other test uses: every interaction (dcn low and full rank), every dtype, mean
// and sum pooling,
// oov reject, with and without a bottom MLP, no user tables, no dense features.
std::vector<TestModel> E2eModels() {
  using engine::DType;
  using engine::Oov;
  using engine::Pooling;
  std::vector<TestModel> models;
  ModelSpec dot = Spec("dot32", Interaction::kDot, DType::kF32);
  dot.tables = {Table("user_a", Side::kUser, 1000, 8),
                Table("user_b", Side::kUser, 50, 8, Pooling::kSum, Oov::kReject),
                Table("item_a", Side::kItem, 1000, 8, Pooling::kMean),
                Table("item_b", Side::kItem, 200, 8),
                Table("item_c", Side::kItem, 30, 8, Pooling::kSum, Oov::kReject)};
  dot.dense_user = 3;
  dot.dense_item = 2;
  dot.bottom_mlp = {16, 8};
  dot.top_mlp = {16, 8, 1};
  models.push_back(testing::MakeRandomModel(dot, 11));

  ModelSpec concat = Spec("concat16", Interaction::kConcat, DType::kF16);
  concat.tables = {Table("item_x", Side::kItem, 500, 4, Pooling::kMean),
                   Table("item_y", Side::kItem, 100, 6)};
  concat.dense_user = 2;
  concat.dense_item = 2;
  concat.top_mlp = {12, 1};
  models.push_back(testing::MakeRandomModel(concat, 12));

  ModelSpec linear = Spec("linear_bf16", Interaction::kLinear, DType::kBF16);
  linear.tables = {Table("user_u", Side::kUser, 300, 5),
                   Table("item_i", Side::kItem, 400, 7, Pooling::kMean)};
  linear.dense_user = 1;
  linear.dense_item = 3;
  linear.bottom_mlp = {8};
  linear.cross_dim = 10;
  linear.top_mlp = {6, 1};
  models.push_back(testing::MakeRandomModel(linear, 13));

  ModelSpec nodense = Spec("nodense", Interaction::kDot, DType::kF32);
  nodense.tables = {Table("user_p", Side::kUser, 100, 4), Table("item_q", Side::kItem, 100, 4),
                    Table("item_r", Side::kItem, 100, 4, Pooling::kMean)};
  nodense.top_mlp = {6, 1};
  models.push_back(testing::MakeRandomModel(nodense, 14));

  ModelSpec dcn = Spec("dcn_lowrank", Interaction::kDcn, DType::kF16);
  dcn.tables = {Table("item_d", Side::kItem, 300, 6), Table("user_d", Side::kUser, 200, 5),
                Table("item_e", Side::kItem, 50, 3, Pooling::kMean)};
  dcn.dense_user = 2;
  dcn.dense_item = 3;
  dcn.bottom_mlp = {8, 4};
  dcn.dcn = {3, 4};
  dcn.top_mlp = {8, 1};
  models.push_back(testing::MakeRandomModel(dcn, 15));

  ModelSpec full = Spec("dcn_full", Interaction::kDcn, DType::kF32);
  full.tables = {Table("user_f", Side::kUser, 100, 4), Table("item_f", Side::kItem, 100, 4)};
  full.dcn = {2, 0};
  full.top_mlp = {6, 1};
  models.push_back(testing::MakeRandomModel(full, 16));
  return models;
}

class RankerE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new std::vector<TestModel>(E2eModels());
    const std::string dir = TempDir("ranker_e2e");
    std::string yaml = R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  metrics_listen: "127.0.0.1:0"
  max_request_bytes: 65536
  max_candidates: 64
  max_ids_per_feature: 8
  shutdown_grace_seconds: 2
engine: {device: cpu, streams: 2, queue_capacity: 64}
models:
)";
    for (const TestModel& model : *models_) {
      absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
      ASSERT_TRUE(path.ok()) << path.status();
      absl::StrAppend(&yaml, "  - {path: \"", *path, "\"}\n");
    }
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "e2e.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
    channel_ = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }

  static void TearDownTestSuite() {
    delete server_;
    delete channel_;
    delete models_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
    stub_ = v1::Ranker::NewStub(*channel_);
  }

  static const TestModel& Model(const std::string& name) {
    for (const TestModel& model : *models_) {
      if (model.spec.name == name) return model;
    }
    ADD_FAILURE() << "no model " << name;
    return models_->front();
  }

  static server::Server* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static std::vector<TestModel>* models_;
  std::unique_ptr<v1::Ranker::Stub> stub_;
};

server::Server* RankerE2eTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* RankerE2eTest::channel_ = nullptr;
std::vector<TestModel>* RankerE2eTest::models_ = nullptr;

void AddFeature(google::protobuf::RepeatedPtrField<v1::Feature>* features, const std::string& name,
                std::vector<int64_t> ids, std::vector<float> weights = {}) {
  v1::Feature* feature = features->Add();
  feature->set_name(name);
  for (int64_t id : ids) feature->add_ids(id);
  for (float w : weights) feature->add_weights(w);
}

// A valid request for dot32 with three candidates.
v1::RankRequest GoodDotRequest() {
  v1::RankRequest request;
  request.set_request_id("good");
  AddFeature(request.mutable_user_features(), "user_a", {1, 2002});
  AddFeature(request.mutable_user_features(), "user_b", {3});
  for (float d : {0.5f, -1.0f, 2.0f}) request.add_user_dense(d);
  for (int c = 0; c < 3; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(500 + c);
    AddFeature(candidate->mutable_features(), "item_a", {4 + c});
    AddFeature(candidate->mutable_features(), "item_b", {5, 6 + c}, {0.5f, 1.5f});
    AddFeature(candidate->mutable_features(), "item_c", {7});
    candidate->add_dense(0.1f * c);
    candidate->add_dense(-0.3f);
  }
  return request;
}

TEST_F(RankerE2eTest, ScoresMatchTheReferenceOnRandomRequests) {
  for (const TestModel& model : *models_) {
    for (uint64_t seed = 1; seed <= 25; ++seed) {
      SCOPED_TRACE(absl::StrCat("model ", model.spec.name, ", request seed ", seed));
      const v1::RankRequest request = testing::RandomRequest(model, seed, 40);
      ExpectMatchesReference(model, request, Rank(stub_.get(), request));
      if (HasFailure()) return;
    }
  }
}

TEST_F(RankerE2eTest, AnEmptyModelFieldMeansTheFirstModel) {
  v1::RankRequest request = GoodDotRequest();
  request.clear_model();
  ExpectMatchesReference(Model("dot32"), request, Rank(stub_.get(), request));
  request.set_model("dot32");
  ExpectMatchesReference(Model("dot32"), request, Rank(stub_.get(), request));
}

TEST_F(RankerE2eTest, TopKKeepsTheBestAndTiesGoToTheLowerIndex) {
  v1::RankRequest request = GoodDotRequest();
  // Candidates 3, 4, 5 repeat 0, 1, 2 under other item ids: equal scores.
  for (int c = 0; c < 3; ++c) {
    v1::Candidate copy = request.candidates(c);
    copy.set_item_id(900 + c);
    *request.add_candidates() = copy;
  }
  const Reply all = Rank(stub_.get(), request);
  ExpectMatchesReference(Model("dot32"), request, all);
  ASSERT_EQ(all.response.items_size(), 6);
  for (int i = 0; i < 6; i += 2) {
    const v1::ScoredItem& first = all.response.items(i);
    const v1::ScoredItem& second = all.response.items(i + 1);
    EXPECT_EQ(first.score(), second.score()) << "identical candidates scored differently";
    EXPECT_EQ(second.index(), first.index() + 3) << "the tie must list the lower index first";
  }
  for (uint32_t k : {1u, 2u, 3u, 5u, 6u, 7u}) {
    request.set_top_k(k);
    const Reply top = Rank(stub_.get(), request);
    ExpectMatchesReference(Model("dot32"), request, top);
    for (int i = 0; i < top.response.items_size(); ++i) {
      EXPECT_EQ(top.response.items(i).index(), all.response.items(i).index()) << "top_k " << k;
    }
  }
}

TEST_F(RankerE2eTest, NoCandidatesIsOkWithAnEmptyList) {
  v1::RankRequest request = GoodDotRequest();
  request.clear_candidates();
  const Reply reply = Rank(stub_.get(), request);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(reply.response.items_size(), 0);
  EXPECT_EQ(reply.response.model_version(), "dot32-v3");
}

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

TEST_F(RankerE2eTest, ConcurrentClientsAllScoreRight) {
  std::vector<std::thread> threads;
  std::atomic<int> checked{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::Ranker::NewStub(*channel_);
      for (int i = 0; i < 15; ++i) {
        const TestModel& model = (*models_)[(t + i) % models_->size()];
        const uint64_t seed = 1000 + t * 100 + i;
        SCOPED_TRACE(absl::StrCat("model ", model.spec.name, ", request seed ", seed));
        const v1::RankRequest request = testing::RandomRequest(model, seed, 64);
        ExpectMatchesReference(model, request, Rank(stub.get(), request));
        ++checked;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(checked.load(), 60);
}

TEST_F(RankerE2eTest, HealthIsServing) {
  absl::StatusOr<int> overall = testing::HealthCheck(*channel_, "");
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, 1);  // SERVING
  absl::StatusOr<int> ranker = testing::HealthCheck(*channel_, "fuserank.v1.Ranker");
  ASSERT_TRUE(ranker.ok()) << ranker.status();
  EXPECT_EQ(*ranker, 1);
}

TEST_F(RankerE2eTest, ReflectionListsTheRanker) {
  absl::StatusOr<std::vector<std::string>> services = testing::ReflectionServices(*channel_);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, ::testing::Contains("fuserank.v1.Ranker"));
  EXPECT_THAT(*services, ::testing::Contains("grpc.health.v1.Health"));
  EXPECT_THAT(*services, ::testing::Not(::testing::Contains("fuserank.v1.Admin")))
      << "Admin belongs on server.admin_listen only";
}

TEST_F(RankerE2eTest, AdminAnswersOnItsOwnPortOnly) {
  ASSERT_NE(server_->admin_port(), 0);
  ASSERT_NE(server_->admin_port(), server_->port());
  auto admin = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->admin_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GetHotRowsRequest request;
  request.set_model("nodense");
  v1::HotRowsStatus response;
  const grpc::Status status = admin->GetHotRows(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.tables_size(), 3);
  EXPECT_EQ(response.tables(0).table(), "user_p");
  // And not on the public port: there the service does not exist.
  auto public_admin = v1::Admin::NewStub(*channel_);
  grpc::ClientContext public_context;
  const grpc::Status on_public = public_admin->GetHotRows(&public_context, {}, &response);
  EXPECT_EQ(on_public.error_code(), grpc::StatusCode::UNIMPLEMENTED);  // unknown service
}

// The value of the series whose line starts with `series` ("name{labels}"), or -1.
double SeriesValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(RankerE2eTest, MetricsAreServedWithEveryFamily) {
  ASSERT_NE(server_->metrics_port(), 0);
  const std::string invalid = R"(fuserank_requests_total{code="INVALID_ARGUMENT",rpc="Rank"})";
  const std::string ok = R"(fuserank_requests_total{code="OK",rpc="Rank"})";
  absl::StatusOr<std::string> before = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  v1::RankRequest bad = GoodDotRequest();
  bad.set_user_dense(0, kNaN);
  Rank(stub_.get(), bad);
  Rank(stub_.get(), GoodDotRequest());
  absl::StatusOr<std::string> after = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  for (const char* family :
       {"fuserank_requests_total", "fuserank_request_duration_seconds",
        "fuserank_stage_duration_seconds", "fuserank_batch_candidates",
        "fuserank_embedding_cache_lookups_total", "fuserank_hot_rows", "fuserank_hot_rows_version",
        "fuserank_inflight_requests", "fuserank_queue_depth", "fuserank_model_info"}) {
    EXPECT_THAT(*after, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  for (const char* stage : {"decode", "queue", "lookup", "cross", "dnn", "topk", "encode"}) {
    EXPECT_THAT(*after, HasSubstr(absl::StrCat("fuserank_stage_duration_seconds_count{stage=\"",
                                               stage, "\"}")));
  }
  // isa: the server's own choice (engine/cpu/cpu_simd.h), which its FMA probe made.
  EXPECT_THAT(*after, HasSubstr(R"(fuserank_model_info{device="cpu",isa=")"));
  EXPECT_THAT(*after, HasSubstr(R"(",model="dot32",version="dot32-v3"} 1)"));
  EXPECT_EQ(SeriesValue(*after, invalid), SeriesValue(*before, invalid) + 1);
  EXPECT_EQ(SeriesValue(*after, ok), SeriesValue(*before, ok) + 1);
  EXPECT_GE(SeriesValue(*after, "fuserank_inflight_requests"), 0);
}

}  // namespace
}  // namespace fuserank
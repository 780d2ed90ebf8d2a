#include "tests/e2e/ranker_e2e_util.h"

#include "absl/strings/str_cat.h"
#include "server/config.h"
#include "tests/e2e/model_spec_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"

namespace fuserank::testing {

std::vector<TestModel> RankerE2eModels() {
  using engine::DType;
  using engine::Interaction;
  using engine::ModelSpec;
  using engine::Pooling;
  using engine::Side;
  std::vector<TestModel> models;
  models.push_back(MakeRandomModel(Dot32Spec("dot32-v3"), 11));
  models.push_back(MakeRandomModel(Concat16Spec("concat16-v3"), 12));

  ModelSpec linear = E2eSpec("linear_bf16", Interaction::kLinear, DType::kBF16, "linear_bf16-v3");
  linear.tables = {E2eTable("user_u", Side::kUser, 300, 5),
                   E2eTable("item_i", Side::kItem, 400, 7, Pooling::kMean)};
  linear.dense_user = 1;
  linear.dense_item = 3;
  linear.bottom_mlp = {8};
  linear.cross_dim = 10;
  linear.top_mlp = {6, 1};
  models.push_back(MakeRandomModel(linear, 13));

  ModelSpec nodense = E2eSpec("nodense", Interaction::kDot, DType::kF32, "nodense-v3");
  nodense.tables = {E2eTable("user_p", Side::kUser, 100, 4),
                    E2eTable("item_q", Side::kItem, 100, 4),
                    E2eTable("item_r", Side::kItem, 100, 4, Pooling::kMean)};
  nodense.top_mlp = {6, 1};
  models.push_back(MakeRandomModel(nodense, 14));

  ModelSpec dcn = E2eSpec("dcn_lowrank", Interaction::kDcn, DType::kF16, "dcn_lowrank-v3");
  dcn.tables = {E2eTable("item_d", Side::kItem, 300, 6), E2eTable("user_d", Side::kUser, 200, 5),
                E2eTable("item_e", Side::kItem, 50, 3, Pooling::kMean)};
  dcn.dense_user = 2;
  dcn.dense_item = 3;
  dcn.bottom_mlp = {8, 4};
  dcn.dcn = {3, 4};
  dcn.top_mlp = {8, 1};
  models.push_back(MakeRandomModel(dcn, 15));

  ModelSpec full = E2eSpec("dcn_full", Interaction::kDcn, DType::kF32, "dcn_full-v3");
  full.tables = {E2eTable("user_f", Side::kUser, 100, 4), E2eTable("item_f", Side::kItem, 100, 4)};
  full.dcn = {2, 0};
  full.top_mlp = {6, 1};
  models.push_back(MakeRandomModel(full, 16));
  return models;
}

void RankerE2eTest::SetUpTestSuite() {
  models_ = new std::vector<TestModel>(RankerE2eModels());
  const std::string dir = TempDir("ranker_e2e");
  std::string yaml = E2eServerYaml("127.0.0.1:0");
  for (const TestModel& model : *models_) {
    absl::StatusOr<std::string> path = WriteTestModel(model, dir);
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

server::Server* RankerE2eTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* RankerE2eTest::channel_ = nullptr;
std::vector<TestModel>* RankerE2eTest::models_ = nullptr;

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

}  // namespace fuserank::testing

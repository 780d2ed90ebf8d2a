// The KServe v2 metadata calls on the real server: health and readiness, server and model
// metadata (the tensors of SPEC section 6 under the `models:` names), Triton's ModelConfig
// and RepositoryIndex; the service in grpc.health and reflection; ModelInfer counted in
// fuserank_requests_total; UNAVAILABLE after shutdown.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/kserve/infer_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/kserve_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"

namespace fuserank {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NamedModel;

class KServeMetadataE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new std::vector<NamedModel>(testing::KServeModels());
    auto started = testing::StartKServeServer(*models_, testing::TempDir("kserve_meta"));
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
    stub_ = inference::GRPCInferenceService::NewStub(*channel_);
  }

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ((*stub_).*method)(&context, request, response);
  }

  bool ModelReady(const std::string& name, const std::string& version) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    EXPECT_TRUE(Call(&inference::GRPCInferenceService::Stub::ModelReady, request, &response).ok());
    return response.ready();
  }

  static server::Server* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static std::vector<NamedModel>* models_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

server::Server* KServeMetadataE2eTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* KServeMetadataE2eTest::channel_ = nullptr;
std::vector<NamedModel>* KServeMetadataE2eTest::models_ = nullptr;

using Stub = inference::GRPCInferenceService::Stub;

TEST_F(KServeMetadataE2eTest, ServerIsLiveAndReady) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(Call(&Stub::ServerLive, inference::ServerLiveRequest(), &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(Call(&Stub::ServerReady, inference::ServerReadyRequest(), &ready).ok());
  EXPECT_TRUE(ready.ready());
}

TEST_F(KServeMetadataE2eTest, ModelsAreReadyUnderTheirServedNamesAndVersions) {
  EXPECT_TRUE(ModelReady("ranker_a", ""));
  EXPECT_TRUE(ModelReady("ranker_a", "dot32-v2"));
  EXPECT_TRUE(ModelReady("concat16", "concat16-v2"));
  EXPECT_TRUE(ModelReady("linear_nodense", ""));
  EXPECT_FALSE(ModelReady("ranker_a", "1"));
  EXPECT_FALSE(ModelReady("dot32", ""));  // served as ranker_a
  EXPECT_FALSE(ModelReady("nope", ""));
}

TEST_F(KServeMetadataE2eTest, ServerMetadataNamesFuserank) {
  inference::ServerMetadataResponse response;
  ASSERT_TRUE(Call(&Stub::ServerMetadata, inference::ServerMetadataRequest(), &response).ok());
  EXPECT_EQ(response.name(), "fuserank");
  EXPECT_FALSE(response.version().empty());
  EXPECT_THAT(response.extensions(), ElementsAre("model_configuration", "parameters"));
}

TEST_F(KServeMetadataE2eTest, ModelMetadataListsTheTensorsOfSectionSix) {
  inference::ModelMetadataRequest request;
  request.set_name("ranker_a");
  inference::ModelMetadataResponse response;
  ASSERT_TRUE(Call(&Stub::ModelMetadata, request, &response).ok());
  EXPECT_EQ(response.name(), "ranker_a");
  EXPECT_THAT(response.versions(), ElementsAre("dot32-v2"));
  EXPECT_EQ(response.platform(), "fuserank");
  std::vector<std::string> inputs;
  for (const auto& input : response.inputs()) {
    inputs.push_back(absl::StrCat(input.name(), " ", input.datatype(), " [",
                                  absl::StrJoin(input.shape(), ","), "]"));
  }
  std::vector<std::string> expected;
  for (const char* user : {"user_a", "user_b"}) {
    expected.push_back(absl::StrCat(user, " INT64 [-1]"));
    expected.push_back(absl::StrCat(user, "__lengths INT32 [1]"));
    expected.push_back(absl::StrCat(user, "__weights FP32 [-1]"));
  }
  for (const char* item : {"item_a", "item_b", "item_c"}) {
    expected.push_back(absl::StrCat(item, " INT64 [-1]"));
    expected.push_back(absl::StrCat(item, "__lengths INT32 [-1]"));
    expected.push_back(absl::StrCat(item, "__weights FP32 [-1]"));
  }
  expected.push_back("user_dense FP32 [1,3]");
  expected.push_back("item_dense FP32 [-1,2]");
  expected.push_back("item_ids INT64 [-1]");
  EXPECT_EQ(inputs, expected);
  std::vector<std::string> outputs;
  for (const auto& output : response.outputs()) {
    outputs.push_back(absl::StrCat(output.name(), " ", output.datatype()));
  }
  EXPECT_THAT(outputs, ElementsAre("scores FP32", "indices INT32", "item_ids INT64"));
}

TEST_F(KServeMetadataE2eTest, AModelWithoutDenseListsNoDenseInputs) {
  inference::ModelMetadataRequest request;
  request.set_name("linear_nodense");
  inference::ModelMetadataResponse response;
  ASSERT_TRUE(Call(&Stub::ModelMetadata, request, &response).ok());
  for (const auto& input : response.inputs()) {
    EXPECT_NE(input.name(), "user_dense");
    EXPECT_NE(input.name(), "item_dense");
  }
  EXPECT_EQ(response.inputs_size(), 7);
}

TEST_F(KServeMetadataE2eTest, UnknownModelsAndVersionsAreNotFound) {
  inference::ModelMetadataRequest request;
  request.set_name("nope");
  inference::ModelMetadataResponse response;
  const grpc::Status unknown = Call(&Stub::ModelMetadata, request, &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("model 'nope' is not loaded"));
  // The hint names this request's field (Rank's is `model`).
  EXPECT_THAT(unknown.error_message(), HasSubstr("(leave `name` empty for the default, "));
  inference::ModelConfigRequest unknown_config;
  unknown_config.set_name("nope");
  inference::ModelConfigResponse unknown_config_response;
  EXPECT_THAT(Call(&Stub::ModelConfig, unknown_config, &unknown_config_response).error_message(),
              HasSubstr("(leave `name` empty for the default, "));
  request.set_name("concat16");
  request.set_version("3");
  inference::ModelConfigRequest config_request;
  config_request.set_name("concat16");
  config_request.set_version("3");
  inference::ModelConfigResponse config;
  EXPECT_EQ(Call(&Stub::ModelMetadata, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Call(&Stub::ModelConfig, config_request, &config).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(KServeMetadataE2eTest, ModelConfigHasNoBatchDimensionAndTheSameTensors) {
  inference::ModelConfigRequest request;
  request.set_name("concat16");
  inference::ModelConfigResponse response;
  ASSERT_TRUE(Call(&Stub::ModelConfig, request, &response).ok());
  const inference::ModelConfig& config = response.config();
  EXPECT_EQ(config.name(), "concat16");
  EXPECT_EQ(config.platform(), "fuserank");
  EXPECT_EQ(config.backend(), "fuserank");
  EXPECT_EQ(config.max_batch_size(), 0);
  ASSERT_EQ(config.input_size(), 9);  // 2 tables x 3, user_dense, item_dense, item_ids
  EXPECT_EQ(config.input(0).name(), "item_x");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_INT64);
  EXPECT_TRUE(config.input(0).optional());
  EXPECT_EQ(config.input(8).name(), "item_ids");
  EXPECT_FALSE(config.input(8).optional());
  ASSERT_EQ(config.output_size(), 3);
  EXPECT_EQ(config.output(1).data_type(), inference::TYPE_INT32);
  EXPECT_EQ(config.parameters().at("version").string_value(), "concat16-v2");
}

TEST_F(KServeMetadataE2eTest, RepositoryIndexListsEveryServedModel) {
  inference::RepositoryIndexResponse response;
  ASSERT_TRUE(Call(&Stub::RepositoryIndex, inference::RepositoryIndexRequest(), &response).ok());
  std::vector<std::string> models;
  for (const auto& m : response.models()) {
    models.push_back(absl::StrCat(m.name(), " ", m.version(), " ", m.state()));
  }
  EXPECT_THAT(models, ElementsAre("ranker_a dot32-v2 READY", "concat16 concat16-v2 READY",
                                  "linear_nodense linear_nodense-v2 READY"));
  for (const auto& m : response.models()) EXPECT_EQ(m.reason(), "") << m.name();
  inference::RepositoryIndexRequest ready_only;
  ready_only.set_ready(true);
  ASSERT_TRUE(Call(&Stub::RepositoryIndex, ready_only, &response).ok());
  EXPECT_EQ(response.models_size(), 3);
}

TEST_F(KServeMetadataE2eTest, HealthAndReflectionListTheService) {
  absl::StatusOr<int> health = testing::HealthCheck(*channel_, "inference.GRPCInferenceService");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, 1);
  absl::StatusOr<std::vector<std::string>> services = testing::ReflectionServices(*channel_);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, ::testing::Contains("inference.GRPCInferenceService"));
  EXPECT_THAT(*services, ::testing::Contains("fuserank.v1.Ranker"));
}

TEST_F(KServeMetadataE2eTest, ModelInferIsCountedInTheRequestMetrics) {
  const NamedModel& m = models_->front();
  v1::RankRequest rank = testing::RandomRequest(m.model, 2, 5);
  rank.set_model(m.name);
  inference::ModelInferRequest request =
      bench::ToInferRequest(m.model.spec, rank, {bench::TensorContents::kRaw, false});
  ASSERT_TRUE(testing::Infer(stub_.get(), request).status.ok());
  request.set_model_name("nope");
  EXPECT_FALSE(testing::Infer(stub_.get(), request).status.ok());
  const std::string text = server_->metrics().Scrape();
  EXPECT_THAT(text, HasSubstr(R"(fuserank_requests_total{code="OK",rpc="ModelInfer"})"));
  EXPECT_THAT(
      text, ::testing::Not(HasSubstr(R"(fuserank_requests_total{code="OK",rpc="ModelInfer"} 0)")));
  EXPECT_THAT(
      text,
      ::testing::Not(HasSubstr(R"(fuserank_requests_total{code="NOT_FOUND",rpc="ModelInfer"} 0)")));
  EXPECT_THAT(text, HasSubstr(R"(fuserank_request_duration_seconds_count{rpc="ModelMetadata"})"));
}

// After Shutdown() has returned gRPC itself answers UNAVAILABLE; the server's own refusal
// and readiness during the drain: shutdown_drain_e2e_test.cc.
TEST(KServeLifecycleTest, AfterShutdownModelInferIsUnavailable) {
  std::vector<NamedModel> models = testing::KServeModels();
  models.resize(1);
  auto server = testing::StartKServeServer(models, testing::TempDir("kserve_shutdown"));
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  v1::RankRequest rank = testing::RandomRequest(models[0].model, 3, 10);
  rank.set_model("ranker_a");
  const inference::ModelInferRequest request =
      bench::ToInferRequest(models[0].model.spec, rank, {bench::TensorContents::kRaw, false});
  ASSERT_TRUE(testing::Infer(stub.get(), request).status.ok());
  (*server)->Shutdown();
  const testing::InferReply after = testing::Infer(stub.get(), request);
  EXPECT_EQ(after.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << after.status.error_message();
}

}  // namespace
}  // namespace fuserank

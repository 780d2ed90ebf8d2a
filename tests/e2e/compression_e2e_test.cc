// Compressed requests on the real server in-process on 127.0.0.1:0: gRPC inflates a whole
// message before any size check (1 MB of gzip became 1 GiB of memory), so both ports enable
// only `identity` and refuse a gzip or deflate request before it is inflated
// (UNIMPLEMENTED, gRPC's own message). The same calls uncompressed are served, and the
// server keeps serving after the refusals.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

class CompressionE2eTest : public ::testing::TestWithParam<grpc_compression_algorithm> {
 protected:
  void SetUp() override {
    model_ = testing::MakeRandomModel(testing::SmallSpec(1, 2, 100, 8), 47);
    absl::StatusOr<std::string> path =
        testing::WriteTestModel(model_, testing::TempDir("compression_e2e"));
    ASSERT_TRUE(path.ok()) << path.status();
    const std::string yaml = absl::StrCat(testing::E2eServerYaml("127.0.0.1:0"),
                                          "  - {name: ctr, path: \"", *path, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "compression_e2e.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    const auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                             grpc::InsecureChannelCredentials());
    ranker_ = v1::Ranker::NewStub(channel);
    infer_ = inference::GRPCInferenceService::NewStub(channel);
    admin_ = v1::Admin::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->admin_port()), grpc::InsecureChannelCredentials()));
  }

  // A context that sends its request compressed with `algorithm` (none: as is).
  static void Prepare(grpc::ClientContext* context, grpc_compression_algorithm algorithm) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    context->set_compression_algorithm(algorithm);
  }

  grpc::Status Rank(grpc_compression_algorithm algorithm) {
    grpc::ClientContext context;
    Prepare(&context, algorithm);
    v1::RankRequest request = testing::RandomRequest(model_, 3, 20);
    request.set_model("ctr");
    v1::RankResponse response;
    return ranker_->Rank(&context, request, &response);
  }

  grpc::Status Infer(grpc_compression_algorithm algorithm) {
    grpc::ClientContext context;
    Prepare(&context, algorithm);
    inference::ModelInferRequest request =
        bench::ToInferRequest(model_.spec, testing::RandomRequest(model_, 4, 20),
                              bench::InferRequestOptions{bench::TensorContents::kRaw, false});
    request.set_model_name("ctr");
    inference::ModelInferResponse response;
    return infer_->ModelInfer(&context, request, &response);
  }

  grpc::Status GetHotRows(grpc_compression_algorithm algorithm) {
    grpc::ClientContext context;
    Prepare(&context, algorithm);
    v1::HotRowsStatus response;
    return admin_->GetHotRows(&context, v1::GetHotRowsRequest(), &response);
  }

  testing::TestModel model_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_P(CompressionE2eTest, ACompressedRequestIsRefusedBeforeItIsInflated) {
  ASSERT_NE(server_, nullptr);
  for (const grpc::Status& status : {Rank(GetParam()), Infer(GetParam()), GetHotRows(GetParam())}) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("is disabled"));
  }
  // Uncompressed, the same calls are served.
  const grpc::Status rank = Rank(GRPC_COMPRESS_NONE);
  EXPECT_TRUE(rank.ok()) << rank.error_message();
  const grpc::Status infer = Infer(GRPC_COMPRESS_NONE);
  EXPECT_TRUE(infer.ok()) << infer.error_message();
  const grpc::Status admin = GetHotRows(GRPC_COMPRESS_NONE);
  EXPECT_TRUE(admin.ok()) << admin.error_message();
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CompressionE2eTest,
                         ::testing::Values(GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE));

}  // namespace
}  // namespace fuserank

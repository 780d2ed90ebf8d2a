// The ranking port during a shutdown's drain, through the real server on 127.0.0.1, with a
// Rank call held in a gated backend so that Shutdown() waits in its drain: new Rank and
// ModelInfer calls get the server's own refusal (UNAVAILABLE, "the server is shutting
// down; retry on another replica"), KServe readiness says not ready; and a call that
// outlasts server.shutdown_grace_seconds is cut off, with a warning that counts it.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/gated_backend_util.h"
#include "tests/e2e/kserve_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/stdout_capture_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr char kRefusal[] = "the server is shutting down; retry on another replica";

class ShutdownDrainE2eTest : public ::testing::Test {
 protected:
  // A server of one model behind `gate_`, draining for up to `grace_seconds`.
  void StartServer(const std::string& name, int grace_seconds) {
    model_ = testing::MakeRandomModel(testing::SmallSpec(1, 1, 100, 4), /*seed=*/17);
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, testing::TempDir(name));
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<server::Config> config = server::ParseConfig(
        absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\", ",
                     "shutdown_grace_seconds: ", grace_seconds,
                     "}\nengine: {device: cpu, streams: 1}\nmodel: {path: \"", *path, "\"}\n"),
        name + ".yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> server =
        server::Server::Start(*config, testing::GatedCpuHooks(gate_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    ranker_ = v1::Ranker::NewStub(channel_);
    kserve_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  bool ServerReady() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ServerReadyResponse response;
    const grpc::Status status =
        kserve_->ServerReady(&context, inference::ServerReadyRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.ready();
  }

  std::shared_ptr<testing::Gate> gate_ = std::make_shared<testing::Gate>();
  testing::TestModel model_;
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};

TEST_F(ShutdownDrainE2eTest, DuringTheDrainNewCallsAreRefusedAndNothingIsReady) {
  StartServer("drain_refusal", 60);
  if (HasFatalFailure()) return;
  const std::string name = model_.spec.name;
  v1::RankRequest request = testing::RandomRequest(model_, 3, 10);
  request.set_model(name);
  const inference::ModelInferRequest infer =
      bench::ToInferRequest(model_.spec, request, {bench::TensorContents::kRaw, false});
  ASSERT_TRUE(ServerReady());
  ASSERT_TRUE(testing::Infer(kserve_.get(), infer).status.ok());

  gate_->armed = true;
  testing::Reply held;
  std::thread rank([&] { held = testing::Rank(ranker_.get(), request); });
  gate_->entered.WaitForNotification();  // in flight: the drain waits for it
  std::thread shutdown([&] { server_->Shutdown(); });
  // ServerReady turns false once both services refuse (KServe's refusal starts last).
  bool ready = true;
  for (int i = 0; i < 30000 && ready; ++i) {
    ready = ServerReady();
    if (ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(ready) << "ServerReady never said false during the drain";

  const testing::Reply refused = testing::Rank(ranker_.get(), request);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  EXPECT_EQ(refused.status.error_message(), kRefusal);
  const testing::InferReply refused_infer = testing::Infer(kserve_.get(), infer);
  EXPECT_EQ(refused_infer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused_infer.status.error_message();
  EXPECT_EQ(refused_infer.status.error_message(), kRefusal);

  {
    grpc::ClientContext context;
    inference::ModelReadyRequest ready_request;
    ready_request.set_name(name);
    inference::ModelReadyResponse ready_response;
    const grpc::Status status = kserve_->ModelReady(&context, ready_request, &ready_response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_FALSE(ready_response.ready());
  }
  {
    grpc::ClientContext context;
    inference::RepositoryIndexResponse index;
    const grpc::Status status =
        kserve_->RepositoryIndex(&context, inference::RepositoryIndexRequest(), &index);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(index.models_size(), 1);
    for (const auto& entry : index.models()) {
      EXPECT_EQ(entry.name(), name);
      EXPECT_EQ(entry.state(), "UNAVAILABLE");
    }
  }

  gate_->released.Notify();
  rank.join();
  shutdown.join();
  testing::ExpectMatchesReference(model_, request, held);  // drained, not cut off
}

TEST_F(ShutdownDrainE2eTest, ACallThatOutlastsTheGraceIsCutOffAndCounted) {
  StartServer("drain_grace", 1);
  if (HasFatalFailure()) return;
  const v1::RankRequest request = testing::RandomRequest(model_, 4, 10);
  testing::StdoutCapture log(testing::TempDir("drain_grace_log") + "/log.txt");
  gate_->armed = true;
  testing::Reply held;
  std::thread rank([&] { held = testing::Rank(ranker_.get(), request); });
  gate_->entered.WaitForNotification();
  std::thread shutdown([&] { server_->Shutdown(); });
  // The grace runs out after 1 s; the warning comes before gRPC cuts the call off, and the
  // held batch stays in the backend until then.
  const std::string warning = "server.shutdown_grace_seconds (1 s) ran out";
  for (int i = 0; i < 3000 && log.Text().find(warning) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rank.join();  // cut off by gRPC (were it not: its 30 s deadline)
  gate_->released.Notify();
  shutdown.join();
  const std::string text = log.Stop();
  EXPECT_THAT(testing::LineWith(text, warning),
              HasSubstr("ran out: cancelling the 1 call still in flight"))
      << text;
  // gRPC's own cut-off (here UNAVAILABLE "Cancelling all calls"), not a deadline or an
  // answer.
  EXPECT_THAT(held.status.error_code(),
              ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED))
      << held.status.error_message();
  EXPECT_NE(held.status.error_message(), kRefusal);
}

}  // namespace
}  // namespace fuserank

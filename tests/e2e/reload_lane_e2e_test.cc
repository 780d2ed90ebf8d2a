// A reload of a large model (fuserank-gen-model, hundreds of MB) through the real server's
// Admin ReloadModel runs on a lane of its own: while it loads, hot-row calls of the same
// model answer (and their changes are taken over by the new version), a second reload is
// refused at once naming the reload in progress, and a shutdown waits for the reload and
// then stops cleanly.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

// A reload answered asynchronously: started, then polled without blocking.
struct PendingReload {
  grpc::ClientContext context;
  v1::ReloadModelRequest request;
  v1::ReloadModelResponse response;
  grpc::Status status;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ReloadModelResponse>> reader;

  void Start(v1::Admin::Stub* admin) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    reader = admin->AsyncReloadModel(&context, request, &cq);
    reader->Finish(&response, &status, this);
  }
  // True once the call has answered (`wait`: how long to wait for that).
  bool Done(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    if (done_) return true;
    void* tag = nullptr;
    bool ok = false;
    done_ = cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + wait) ==
            grpc::CompletionQueue::GOT_EVENT;
    return done_;
  }
  ~PendingReload() {
    Done(std::chrono::seconds(300));
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  }

 private:
  bool done_ = false;
};

class ReloadLaneE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(absl::StrCat(
        "reload_lane_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    spec_ = dir_ + "/big.yaml";
    const std::string command = testing::LargeModelCommand(spec_);
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::string yaml = absl::StrCat(
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", metrics_listen: \"\", "
        "shutdown_grace_seconds: 2}\n"
        "engine: {device: cpu, streams: 1}\n"
        "model: {path: \"",
        spec_, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "lane.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    admin_ = v1::Admin::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->admin_port()), grpc::InsecureChannelCredentials()));
    hot_rows_ = std::make_unique<testing::HotRowsAdmin>(server_->admin_port());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // A reload that the checks refuse (a path outside the model roots) unless the reload
  // lane is busy: RESOURCE_EXHAUSTED then, naming the reload in progress.
  grpc::Status Probe() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ReloadModelRequest request;
    request.set_path("/etc/hostname");
    v1::ReloadModelResponse response;
    return admin_->ReloadModel(&context, request, &response);
  }

  // Starts a reload of the model's current spec and waits until the lane says it is in
  // progress. A reload that answers first (it ended before a probe saw it, or a probe held
  // the lane when it arrived) is started again, up to 5 times; null if none was seen.
  std::unique_ptr<PendingReload> StartReload() {
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto reload = std::make_unique<PendingReload>();
      reload->Start(admin_.get());
      while (!reload->Done()) {
        const grpc::Status probe = Probe();
        if (probe.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          EXPECT_THAT(probe.error_message(),
                      HasSubstr("a reload of model 'big' from its current spec is in progress"));
          EXPECT_THAT(probe.error_message(), HasSubstr("reloads run one at a time"));
          return reload;
        }
        EXPECT_EQ(probe.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
            << probe.error_message();
      }
    }
    return nullptr;
  }

  std::string dir_, spec_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<testing::HotRowsAdmin> hot_rows_;
};

TEST_F(ReloadLaneE2eTest, HotRowCallsAnswerWhileALargeModelReloads) {
  const uint64_t version_before = hot_rows_->Get().response.version();
  // A reload that ends before the calls below are through proves nothing: try again.
  bool answered_during_the_reload = false;
  uint64_t set_version = 0;
  for (int attempt = 0; attempt < 3 && !answered_during_the_reload; ++attempt) {
    std::unique_ptr<PendingReload> reload = StartReload();
    ASSERT_NE(reload, nullptr) << "no reload was ever seen in progress";
    const testing::AdminReply set = hot_rows_->Set({{"item_0", {7, 8, 9}}});
    ASSERT_TRUE(set.status.ok()) << set.status.error_message();
    set_version = set.response.version();
    const testing::AdminReply get = hot_rows_->Get({"item_0"});
    ASSERT_TRUE(get.status.ok()) << get.status.error_message();
    EXPECT_EQ(get.response.tables(0).hot_rows(), 3u);
    // Still loading: the hot-row calls did not wait for it.
    answered_during_the_reload =
        !reload->Done() && Probe().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    ASSERT_TRUE(reload->Done(std::chrono::seconds(300)));
    ASSERT_TRUE(reload->status.ok()) << reload->status.error_message();
  }
  EXPECT_TRUE(answered_during_the_reload)
      << "SetHotRows and GetHotRows never answered while a reload was in progress";
  // The change made during the reload is served by the new version, its version past it.
  const testing::AdminReply after = hot_rows_->Get({"item_0"});
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.response.tables(0).hot_rows(), 3u);
  EXPECT_GT(after.response.version(), set_version);
  EXPECT_GT(set_version, version_before);
}

TEST_F(ReloadLaneE2eTest, AShutdownDuringAReloadWaitsForItAndStopsCleanly) {
  std::unique_ptr<PendingReload> reload = StartReload();
  ASSERT_NE(reload, nullptr) << "no reload was ever seen in progress";
  server_->Shutdown();  // what SIGTERM runs (server/main.cc)
  ASSERT_TRUE(reload->Done(std::chrono::seconds(300)));
  // The shutdown waited for the reload to finish (its answer may be cut off with the
  // admin server, which stops at once after it).
  EXPECT_THAT(reload->status.error_code(),
              ::testing::AnyOf(grpc::StatusCode::OK, grpc::StatusCode::CANCELLED,
                               grpc::StatusCode::UNAVAILABLE))
      << reload->status.error_message();
  server_.reset();
}

}  // namespace
}  // namespace fuserank

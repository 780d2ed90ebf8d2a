// A client that never takes its answers (HTTP/2 stream window 0, never opened) on the real
// server in-process: its calls are computed and answered, but gRPC can write none of the
// answers, so they kept their in-flight slots for as long as the connection stayed open
// and every other client got RESOURCE_EXHAUSTED. With server.reply_timeout_seconds the
// stalled calls are cancelled (the client sees RST_STREAM) and other clients are served
// again.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/raw_h2_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

constexpr int kInflight = 4;

TEST(StalledReplyE2eTest, CallsWhoseAnswersAreNotTakenAreCancelledAndFreeTheirSlots) {
  const testing::TestModel model = testing::MakeRandomModel(testing::SmallSpec(1, 2, 100, 8), 53);
  absl::StatusOr<std::string> path =
      testing::WriteTestModel(model, testing::TempDir("stalled_reply_e2e"));
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string yaml = absl::StrCat(R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: ""
  metrics_listen: ""
  shutdown_grace_seconds: 1
  max_inflight_requests: )",
                                        kInflight, R"(
  max_concurrent_streams: 64
  reply_timeout_seconds: 3
engine: {device: cpu, streams: 1}
model: {path: ")",
                                        *path, R"(", watch_interval_seconds: 0}
)");
  absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "stalled_reply_e2e.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto ranker = v1::Ranker::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  v1::RankRequest request = testing::RandomRequest(model, 5, 16);
  request.set_model("");
  ASSERT_TRUE(testing::Rank(ranker.get(), request).status.ok());

  // Calls without a deadline whose answers can never be written, one more at a time until
  // they hold every slot (this client's own calls, one at a time, may take one meanwhile).
  testing::RawH2Connection stalled((*server)->port(), /*stream_window=*/0);
  ASSERT_TRUE(stalled.ok());
  bool refused = false;
  for (int sent = 0; sent < 32 && !refused; ++sent) {
    ASSERT_TRUE(
        stalled.SendUnary(1 + 2 * sent, "/fuserank.v1.Ranker/Rank", request.SerializeAsString()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    refused = testing::Rank(ranker.get(), request).status.error_code() ==
              grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  ASSERT_TRUE(refused) << "the stalled calls never held every in-flight slot";
  // The watch cancels them server.reply_timeout_seconds after their answers.
  const auto start = std::chrono::steady_clock::now();
  bool served_again = false;
  while (!served_again && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    served_again = testing::Rank(ranker.get(), request).status.ok();
  }
  EXPECT_TRUE(served_again) << "the stalled calls kept their slots";
  // Each stalled call is reset; a pass of the watch cancels those past the timeout then,
  // so the last may follow the probe's answer by one pass (250 ms).
  for (int i = 0; i < 100 && stalled.resets() < kInflight; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(stalled.resets(), kInflight);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace fuserank

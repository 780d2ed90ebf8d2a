// The Admin service during a shutdown's drain, through the real server on 127.0.0.1: while
// a Rank call still runs (held in a gated backend), SetHotRows, GetHotRows, RebuildHotRows
// and ReloadModel are UNAVAILABLE at once (SPEC section 3: every call from the shutdown
// on), the admin port's health ("" and fuserank.v1.Admin, SERVING before) is NOT_SERVING,
// and the held Rank call still finishes.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/gated_backend_util.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr int kServing = 1;
constexpr int kNotServing = 2;

TEST(AdminShutdownE2eTest, AdminCallsDuringTheDrainAreUnavailable) {
  const testing::TestModel model =
      testing::MakeRandomModel(testing::SmallSpec(1, 1, 100, 4), /*seed=*/9);
  absl::StatusOr<std::string> path =
      testing::WriteTestModel(model, testing::TempDir("admin_shutdown"));
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                   "metrics_listen: \"\", shutdown_grace_seconds: 60}\n"
                   "engine: {device: cpu, streams: 1}\nmodel: {path: \"",
                   *path, "\"}\n"),
      "admin_shutdown.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto gate = std::make_shared<testing::Gate>();
  absl::StatusOr<std::unique_ptr<server::Server>> server =
      server::Server::Start(*config, testing::GatedCpuHooks(gate));
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto ranker = v1::Ranker::NewStub(channel);
  testing::HotRowsAdmin admin((*server)->admin_port());
  ASSERT_TRUE(admin.Get().status.ok());
  // The admin port's health knows the Admin service, and serves.
  auto admin_channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->admin_port()),
                                           grpc::InsecureChannelCredentials());
  for (const std::string service : {"", "fuserank.v1.Admin"}) {
    const absl::StatusOr<int> serving = testing::HealthCheck(admin_channel, service);
    ASSERT_TRUE(serving.ok()) << "'" << service << "': " << serving.status();
    EXPECT_EQ(*serving, kServing) << "'" << service << "'";
  }

  gate->armed = true;
  const v1::RankRequest request = testing::RandomRequest(model, 3, 10);
  testing::Reply held;
  std::thread rank([&] { held = testing::Rank(ranker.get(), request); });
  gate->entered.WaitForNotification();  // the Rank call is in flight: the drain waits for it
  std::thread shutdown([&] { (*server)->Shutdown(); });
  // The admin service is refusing once health says NOT_SERVING (Shutdown does it first).
  absl::StatusOr<int> health;
  do {
    health = testing::HealthCheck(channel, "");
  } while (health.ok() && *health != kNotServing);
  EXPECT_TRUE(health.ok()) << health.status();  // the ranking port serves until the drain ends
  // So does the admin port, which says it no longer serves (before the ranking port does).
  for (const std::string service : {"", "fuserank.v1.Admin"}) {
    const absl::StatusOr<int> draining = testing::HealthCheck(admin_channel, service);
    EXPECT_EQ(draining.ok() ? *draining : -1, kNotServing)
        << "'" << service << "': " << draining.status();
  }

  const testing::AdminReply get = admin.Get();
  EXPECT_EQ(get.status.error_code(), grpc::StatusCode::UNAVAILABLE) << get.status.error_message();
  EXPECT_THAT(get.status.error_message(), HasSubstr("shutting down"));
  const testing::AdminReply set = admin.Set({{"item_0", {1, 2, 3}}});
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::UNAVAILABLE) << set.status.error_message();
  const testing::AdminReply rebuild = admin.Rebuild();
  EXPECT_EQ(rebuild.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << rebuild.status.error_message();
  const grpc::Status reload = admin.Reload("", "");
  EXPECT_EQ(reload.error_code(), grpc::StatusCode::UNAVAILABLE) << reload.error_message();

  gate->released.Notify();
  rank.join();
  shutdown.join();
  EXPECT_TRUE(held.status.ok()) << held.status.error_message();  // drained, not cut off
  testing::ExpectMatchesReference(model, request, held);
}

}  // namespace
}  // namespace fuserank

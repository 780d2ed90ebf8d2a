// The Admin service during a shutdown's drain, through the real server on 127.0.0.1: while
// a Rank call still runs (held in a gated backend), SetHotRows, GetHotRows, RebuildHotRows
// and ReloadModel are UNAVAILABLE at once (SPEC section 3: every call from the shutdown
// on), and the held Rank call still finishes.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/cpu/cpu_backend.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr int kNotServing = 2;

// Holds the first Run() after Arm() until Release(); every other Run() goes straight on.
struct Gate {
  std::atomic<bool> armed{false};
  absl::Notification entered, released;
};

class GatedBackend final : public engine::Backend {
 public:
  GatedBackend(std::unique_ptr<engine::Backend> cpu, std::shared_ptr<Gate> gate)
      : cpu_(std::move(cpu)), gate_(std::move(gate)) {}
  std::string device() const override { return cpu_->device(); }
  int num_workers() const override { return cpu_->num_workers(); }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override {
    if (gate_->armed.exchange(false)) {
      gate_->entered.Notify();
      gate_->released.WaitForNotification();
    }
    return cpu_->Run(worker, batch, result);
  }

 private:
  std::unique_ptr<engine::Backend> cpu_;
  std::shared_ptr<Gate> gate_;
};

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
  auto gate = std::make_shared<Gate>();
  server::ServerHooks hooks;
  hooks.create_backend = [gate](std::shared_ptr<const engine::Model> m, engine::DeviceChoice,
                                const engine::BackendOptions& options)
      -> absl::StatusOr<std::unique_ptr<engine::Backend>> {
    return std::make_unique<GatedBackend>(engine::CreateCpuBackend(std::move(m), options), gate);
  };
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config, hooks);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto ranker = v1::Ranker::NewStub(channel);
  testing::HotRowsAdmin admin((*server)->admin_port());
  ASSERT_TRUE(admin.Get().status.ok());

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

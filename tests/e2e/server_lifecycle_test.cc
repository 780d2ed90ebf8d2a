// Server start and stop: refused calls after shutdown, calls in flight drained, ports in
// use (checked before the models load) and models that do not load stopping the start
// with a message naming the key.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::ExpectMatchesReference;
using ::testing::HasSubstr;
using testing::Rank;
using testing::Reply;
using testing::TempDir;
using testing::TestModel;

// After Shutdown() has returned gRPC itself answers UNAVAILABLE (the server's own refusal
// during the drain: shutdown_drain_e2e_test.cc).
TEST(ServerLifecycleTest, AfterShutdownCallsAreUnavailable) {
  const std::string dir = TempDir("lifecycle");
  const TestModel model = testing::MakeRandomModel(testing::SmallSpec(1, 1, 100, 4), 5);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\"}\n",
                   "model: {path: \"", *path, "\"}\n"),
      "lifecycle.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Ranker::NewStub(channel);
  const v1::RankRequest request = testing::RandomRequest(model, 3, 10);
  ExpectMatchesReference(model, request, Rank(stub.get(), request));
  (*server)->Shutdown();
  const Reply after = Rank(stub.get(), request);
  EXPECT_EQ(after.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << after.status.error_message();
}

TEST(ServerLifecycleTest, ShutdownLetsCallsInFlightFinish) {
  const std::string dir = TempDir("drain");
  const TestModel model = testing::MakeRandomModel(testing::SmallSpec(2, 3, 5000, 32), 6);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\",",
                   " shutdown_grace_seconds: 30}\nengine: {device: cpu, streams: 1}\n",
                   "model: {path: \"", *path, "\"}\n"),
      "drain.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  std::atomic<int> ok{0};
  std::atomic<int> drained{0};  // calls outstanding when Shutdown() began that finished OK
  std::atomic<bool> shutdown_started{false};
  std::atomic<int> finished{0};  // clients that returned (each on its first failed call)
  constexpr int kClients = 8;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto stub = v1::Ranker::NewStub(channel);
      for (int i = 0;; ++i) {
        const v1::RankRequest request = testing::RandomRequest(model, 100 * t + i, 4000);
        const bool before = !shutdown_started;
        const Reply reply = Rank(stub.get(), request);
        if (!reply.status.ok()) {
          // Refused (our UNAVAILABLE), or caught by gRPC's own teardown in its last
          // instant (CANCELLED); never another error.
          EXPECT_THAT(reply.status.error_code(),
                      ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED))
              << reply.status.error_message();
          EXPECT_TRUE(shutdown_started) << "failed before the shutdown";
          ++finished;
          return;
        }
        ExpectMatchesReference(model, request, reply);
        ++ok;
        if (before && shutdown_started) ++drained;
      }
    });
  }
  // Until the server has answered a few calls; a deadline rather than a hang when it
  // answers none (every client then records why and returns).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ok < 12 && finished < kClients && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int ok_before_shutdown = ok.load();
  shutdown_started = true;
  (*server)->Shutdown();
  for (auto& client : clients) client.join();
  ASSERT_GE(ok_before_shutdown, 12) << "the server answered too few calls before the shutdown";
  EXPECT_GE(drained.load(), 1) << "calls in flight at the shutdown must finish, not be cut off";
}

// A plain socket holding 127.0.0.1:<port>; the port, or 0 when it could not.
struct HeldPort {
  HeldPort() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
        listen(fd, 4) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
      port = ntohs(address.sin_port);
    }
  }
  ~HeldPort() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  int port = 0;
};

// The ports are checked before the models load: with a model path that does not exist, the
// error still names the port (a start of minutes of loading stops at once; before the
// check the model's error came first).
TEST(ServerLifecycleTest, APortInUseStopsTheStartBeforeTheModelsLoad) {
  const HeldPort held;
  ASSERT_NE(held.port, 0) << strerror(errno);
  const std::string taken = absl::StrCat("127.0.0.1:", held.port);
  auto start = [](const std::string& listen, const std::string& admin) {
    absl::StatusOr<server::Config> config = server::ParseConfig(
        absl::StrCat("server: {listen: \"", listen, "\", admin_listen: \"", admin,
                     "\", metrics_listen: \"\"}\n", "model: {path: /nonexistent/m.yaml}\n"),
        "ports.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? server::Server::Start(*config).status() : config.status();
  };
  const absl::Status ranking = start(taken, "");
  EXPECT_THAT(
      std::string(ranking.message()),
      HasSubstr("ports.yaml: server.listen: cannot listen on '" + taken + "' (address in use?)"));
  const absl::Status admin = start("127.0.0.1:0", taken);
  EXPECT_THAT(std::string(admin.message()),
              HasSubstr("ports.yaml: server.admin_listen: cannot listen on '" + taken +
                        "' (address in use?)"));
}

TEST(ServerLifecycleTest, APortAServerHoldsStopsTheStartNamingTheKey) {
  const std::string dir = TempDir("port_in_use");
  const TestModel model = testing::MakeRandomModel(testing::SmallSpec(1, 1, 10, 4), 7);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  auto config_for = [&](const std::string& listen, const std::string& admin) {
    return server::ParseConfig(
        absl::StrCat("server: {listen: \"", listen, "\", admin_listen: \"", admin,
                     "\", metrics_listen: \"\"}\n", "model: {path: \"", *path, "\"}\n"),
        "ports.yaml");
  };
  absl::StatusOr<server::Config> first_config = config_for("127.0.0.1:0", "127.0.0.1:0");
  ASSERT_TRUE(first_config.ok()) << first_config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> first = server::Server::Start(*first_config);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());
  absl::StatusOr<server::Config> second_config = config_for(taken, "");
  ASSERT_TRUE(second_config.ok()) << second_config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> second = server::Server::Start(*second_config);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("ports.yaml: server.listen: cannot listen on '" + taken + "'"));
  const std::string admin_taken = absl::StrCat("127.0.0.1:", (*first)->admin_port());
  absl::StatusOr<server::Config> third_config = config_for("127.0.0.1:0", admin_taken);
  ASSERT_TRUE(third_config.ok()) << third_config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> third = server::Server::Start(*third_config);
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("server.admin_listen: cannot listen on '" + admin_taken + "'"));
}

TEST(ServerLifecycleTest, AModelThatDoesNotLoadStopsTheStartNamingThePath) {
  absl::StatusOr<server::Config> config = server::ParseConfig(
      "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\"}\n"
      "model: {path: /nonexistent/m.yaml}\n",
      "broken.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("broken.yaml: model.path '/nonexistent/m.yaml'"));
}

}  // namespace
}  // namespace fuserank

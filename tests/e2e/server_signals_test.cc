// The real fuserank-server binary and its signals and start: SIGHUP is logged and ignored
// (the server keeps serving); SIGTERM while a model still loads exits at once without ever
// listening; a start that fails logs no shutdown.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/remote_table_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using testing::kServerBinary;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A TCP socket listening on 127.0.0.1 that never answers: a Redis seed node that holds
// each CLUSTER SLOTS for the client's whole connect timeout.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1: " << strerror(errno);
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) close(fd_);
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Waits up to `timeout` for a peer to connect to any of `listeners`; true when one did.
bool AnyPeer(const std::vector<SilentListener>& listeners, std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  for (const SilentListener& listener : listeners) fds.push_back({listener.fd(), POLLIN, 0});
  return poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) > 0;
}

// `kServerBinary --config config` with its output in `log`; killed with the test.
pid_t SpawnServer(const std::string& config, const std::string& log) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(127);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execl(kServerBinary, kServerBinary, "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The exit code of `pid` within `timeout`; -1 when a signal ended it, -2 (and SIGKILL)
// when it had not exited by then.
int WaitForExit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ServerSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kServerBinary)) << kServerBinary << " is not built";
    dir_ = testing::MakeTempDir("server_signals");
    model_ = testing::MakeRandomModel(testing::SmallSpec(1, 2, 200, 4), 31);
  }

  std::string WriteConfig(const std::string& name, const std::string& model_path,
                          const std::string& more = "") {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                           "metrics_listen: \"\", shutdown_grace_seconds: 5}\n"
                           "engine: {device: cpu, streams: 1}\nmodel: {path: \""
                        << model_path << "\"}\n"
                        << more;
    return path;
  }

  std::string dir_;
  testing::TestModel model_;
};

TEST_F(ServerSignalsTest, SighupIsLoggedAndIgnoredWhileServing) {
  absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir_);
  ASSERT_TRUE(path.ok()) << path.status();
  testing::ServerProcess server;
  ASSERT_TRUE(
      server.Start(kServerBinary, WriteConfig("hup.yaml", *path), "", std::chrono::seconds(60)))
      << server.log();
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server.log().find("(SIGHUP): ignored") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Still serving, right.
  auto stub = v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                                                      grpc::InsecureChannelCredentials()));
  const v1::RankRequest request = testing::RandomRequest(model_, 4, 12);
  testing::ExpectMatchesReference(model_, request, testing::Rank(stub.get(), request));
  const int exit_code = server.Stop();
  const std::string log = server.log();
  EXPECT_EQ(exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("Hangup (SIGHUP): ignored; fuserank reloads a model through Admin "
                             "ReloadModel or the model file watch (model.watch_interval_seconds: "
                             "5), not on a signal"));
  EXPECT_THAT(log, HasSubstr("Terminated: shutting down"));
  // A reload logs "... now serving; version '...' retired (freed when its last request
  // finishes)"; the file watch, "... changed, reloading".
  EXPECT_THAT(log, Not(HasSubstr("retired (freed"))) << "SIGHUP reloads nothing";
  EXPECT_THAT(log, Not(HasSubstr("reloading"))) << "SIGHUP reloads nothing";
}

// The model's item_0 table lives in a Redis Cluster whose seeds never answer: the load
// waits 500 ms on each (its connect timeout), then serves zeros for it
// (remote.on_remote_error: zero). SIGTERM arrives once a seed is asked, so the load is
// under way for seconds more; it must end the process at once, before any port opens.
TEST_F(ServerSignalsTest, SigtermWhileAModelLoadsExitsAtOnceWithoutListening) {
  absl::StatusOr<std::string> path = testing::WriteWithRedisTable(model_, 1, dir_);
  ASSERT_TRUE(path.ok()) << path.status();
  std::vector<SilentListener> seeds(6);
  std::vector<std::string> addresses;
  for (const SilentListener& seed : seeds) {
    addresses.push_back(absl::StrCat("\"127.0.0.1:", seed.port(), "\""));
  }
  ASSERT_FALSE(HasFailure());
  const std::string config =
      WriteConfig("loading.yaml", *path,
                  absl::StrCat("remote: {seed_nodes: [", absl::StrJoin(addresses, ", "),
                               "], on_remote_error: zero}\n"));
  const std::string log_path = dir_ + "/loading.log";
  const pid_t pid = SpawnServer(config, log_path);
  ASSERT_GT(pid, 0);
  const bool asked = AnyPeer(seeds, std::chrono::seconds(60));
  const auto signalled = std::chrono::steady_clock::now();
  kill(pid, SIGTERM);
  const int exit_code = WaitForExit(pid, std::chrono::seconds(60));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::string log = ReadFile(log_path);
  ASSERT_TRUE(asked) << "the server never asked a seed:\n" << log;
  EXPECT_EQ(exit_code, 1) << log;
  EXPECT_THAT(log, HasSubstr("Terminated during start: exiting"));
  EXPECT_THAT(log, Not(HasSubstr("serving fuserank.v1.Ranker"))) << "a port opened";
  EXPECT_THAT(log, Not(HasSubstr("shutting down")));
  // Not a timing bound: the seeds alone hold the load for 3 s.
  std::printf("exited %.3f s after SIGTERM\n", seconds);
}

TEST_F(ServerSignalsTest, AStartThatFailsLogsNoShutdown) {
  const testing::ServerRun run =
      testing::RunServerToExit("--config " + WriteConfig("bad.yaml", "/nonexistent/m.yaml"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("cannot start: "));
  EXPECT_THAT(run.output, Not(HasSubstr("shut down in"))) << "a server that never served";
}

}  // namespace
}  // namespace fuserank

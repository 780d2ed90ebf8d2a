// The real fuserank-server binary as a subprocess: --check-config on good and bad configs,
// and a clean exit 0 on SIGTERM while serving.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

const char kServer[] = FUSERANK_BINARY_DIR "/bin/fuserank-server";

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Outcome RunServer(const std::string& args) {
  Outcome outcome;
  FILE* pipe = popen(absl::StrCat(kServer, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return outcome;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    outcome.output.append(buffer, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

class ServerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kServer)) << kServer << " is not built";
    dir_ = absl::StrCat(::testing::TempDir(), "/server_process_", getpid());
    std::filesystem::create_directories(dir_);
    model_ = testing::MakeRandomModel(testing::SmallSpec(1, 2, 200, 4), 21);
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    model_path_ = *path;
  }

  std::string WriteConfig(const std::string& name, const std::string& yaml) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << yaml;
    return path;
  }

  std::string ServingConfig() {
    return absl::StrCat(
        "server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"127.0.0.1:0\"\n"
        "  metrics_listen: \"\"\n  shutdown_grace_seconds: 5\n"
        "engine: {device: cpu, streams: 2}\n"
        "model: {path: \"",
        model_path_, "\"}\n");
  }

  std::string dir_;
  testing::TestModel model_;
  std::string model_path_;
};

TEST_F(ServerProcessTest, CheckConfigAcceptsAGoodConfig) {
  const std::string config = WriteConfig("good.yaml", ServingConfig());
  const Outcome outcome = RunServer("--check-config " + config);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("OK"));
}

TEST_F(ServerProcessTest, CheckConfigRefusesABadConfigNamingTheKey) {
  const std::string config =
      WriteConfig("bad.yaml", "engine: {streams: 0, colour: red}\nserver: {listen: nowhere}\n");
  const Outcome outcome = RunServer("--check-config=" + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr(config + ": engine.streams: must be in 1..64, got 0"));
  EXPECT_THAT(outcome.output, HasSubstr(config + ": engine.colour: unknown key"));
  EXPECT_THAT(outcome.output, HasSubstr(config + ": server.listen: must be host:port"));
}

TEST_F(ServerProcessTest, CheckConfigRefusesAModelThatDoesNotLoad) {
  const std::string config =
      WriteConfig("nomodel.yaml", "model: {path: /nonexistent/model.yaml}\n");
  const Outcome outcome = RunServer("--check-config " + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("model.path '/nonexistent/model.yaml'"));
}

TEST_F(ServerProcessTest, ServingRefusesABadConfigBeforeListening) {
  const std::string config = WriteConfig("bad2.yaml", "engine: {device: tpu}\n");
  const Outcome outcome = RunServer("--config " + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("engine.device: must be one of auto|cpu|cuda"));
}

TEST_F(ServerProcessTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunServer("").exit_code, 2);
  EXPECT_EQ(RunServer("--frobnicate x").exit_code, 2);
}

// Reads the child's output until a line tells the Ranker port (or `deadline`).
int WaitForPort(int fd, std::string* log, std::chrono::steady_clock::time_point deadline) {
  const std::regex serving(R"(serving fuserank.v1.Ranker on \S+ \(port (\d+)\))");
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) return 0;  // the child exited
    log->append(buffer, n);
    std::smatch match;
    if (std::regex_search(*log, match, serving)) return std::stoi(match[1]);
  }
  return 0;
}

struct Served {
  int exit_code = -1;  // -1: killed by a signal, or never exited
  std::string log;
};

// Starts the binary on `config`, checks one Rank call scores right, sends SIGTERM and
// collects its exit code and whole output.
Served ServeOneCallThenTerminate(const std::string& config, const testing::TestModel& model) {
  Served served;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return served;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    execl(kServer, kServer, "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  const int port = WaitForPort(pipe_fds[0], &served.log,
                               std::chrono::steady_clock::now() + std::chrono::seconds(30));
  if (port == 0) {
    ADD_FAILURE() << "the server did not start:\n" << served.log;
    kill(pid, SIGKILL);
  } else {
    auto stub = v1::Ranker::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    const v1::RankRequest request = testing::RandomRequest(model, 8, 20);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RankResponse response;
    const grpc::Status status = stub->Rank(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    const std::vector<double> reference = testing::ReferenceScores(model, request);
    EXPECT_GT(response.items_size(), 0);
    for (const v1::ScoredItem& item : response.items()) {
      EXPECT_NEAR(item.score(), reference[item.index()], 5e-5);
    }
    EXPECT_EQ(kill(pid, SIGTERM), 0);
  }
  int wait_status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pid_t done = 0;
  while ((done = waitpid(pid, &wait_status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    ADD_FAILURE() << "the server did not exit within 30 s of SIGTERM";
    kill(pid, SIGKILL);
    waitpid(pid, &wait_status, 0);
  }
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) {
    served.log.append(buffer, n);
  }
  close(pipe_fds[0]);
  if (done != 0 && WIFEXITED(wait_status)) served.exit_code = WEXITSTATUS(wait_status);
  return served;
}

TEST_F(ServerProcessTest, SigtermWhileServingExitsZero) {
  const Served served =
      ServeOneCallThenTerminate(WriteConfig("serve.yaml", ServingConfig()), model_);
  EXPECT_EQ(served.exit_code, 0) << served.log;
  EXPECT_THAT(served.log, HasSubstr("effective config"));
  EXPECT_THAT(served.log, HasSubstr("Terminated: shutting down"));
}

TEST_F(ServerProcessTest, JsonLogsAreOneObjectPerLine) {
  const std::string config =
      WriteConfig("json.yaml", ServingConfig() + "logging: {format: json, access_log_sample: 1}\n");
  const Served served = ServeOneCallThenTerminate(config, model_);
  EXPECT_EQ(served.exit_code, 0) << served.log;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(served.log, '\n', absl::SkipEmpty())) {
    ++lines;
    EXPECT_TRUE(absl::StartsWith(line, "{\"time\":\"") && absl::EndsWith(line, "\"}"))
        << "not a JSON object line: " << line;
    EXPECT_THAT(std::string(line), HasSubstr("\"level\":\""));
  }
  EXPECT_GE(lines, 4);
  // The effective config spans lines: escaped inside one object.
  EXPECT_THAT(served.log, HasSubstr("effective config"));
  EXPECT_THAT(served.log, HasSubstr(R"(\n  listen: 127.0.0.1:0\n  admin_listen:)"));
  EXPECT_THAT(served.log, HasSubstr(R"(admin_token_file: \"\")"));
  // access_log_sample: 1 logs the one call.
  EXPECT_THAT(served.log, HasSubstr("rank request_id='random-8'"));
}

}  // namespace
}  // namespace fuserank

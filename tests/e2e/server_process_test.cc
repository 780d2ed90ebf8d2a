// The real fuserank-server binary as a subprocess: --check-config on good and bad configs,
// and a clean exit 0 on SIGTERM while serving.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

using testing::kServerBinary;
using testing::RunServerToExit;
using testing::ServerRun;

class ServerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kServerBinary)) << kServerBinary << " is not built";
    dir_ = testing::MakeTempDir("server_process");
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
  const ServerRun outcome = RunServerToExit("--check-config " + config);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("OK"));
}

TEST_F(ServerProcessTest, CheckConfigRefusesABadConfigNamingTheKey) {
  const std::string config =
      WriteConfig("bad.yaml", "engine: {streams: 0, colour: red}\nserver: {listen: nowhere}\n");
  const ServerRun outcome = RunServerToExit("--check-config=" + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr(config + ": engine.streams: must be in 1..64, got 0"));
  EXPECT_THAT(outcome.output, HasSubstr(config + ": engine.colour: unknown key"));
  EXPECT_THAT(outcome.output, HasSubstr(config + ": server.listen: must be host:port"));
}

TEST_F(ServerProcessTest, CheckConfigRefusesAModelThatDoesNotLoad) {
  const std::string config =
      WriteConfig("nomodel.yaml", "model: {path: /nonexistent/model.yaml}\n");
  const ServerRun outcome = RunServerToExit("--check-config " + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("model.path '/nonexistent/model.yaml'"));
}

TEST_F(ServerProcessTest, ServingRefusesABadConfigBeforeListening) {
  const std::string config = WriteConfig("bad2.yaml", "engine: {device: tpu}\n");
  const ServerRun outcome = RunServerToExit("--config " + config);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("engine.device: must be one of auto|cpu|cuda"));
}

TEST_F(ServerProcessTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunServerToExit("").exit_code, 2);
  EXPECT_EQ(RunServerToExit("--frobnicate x").exit_code, 2);
}

struct Served {
  int exit_code = -1;  // -1: killed by a signal, or never exited
  std::string log;
};

// Starts the binary on `config`, checks one Rank call scores right, sends SIGTERM and
// collects its exit code and whole output.
Served ServeOneCallThenTerminate(const std::string& config, const testing::TestModel& model) {
  Served served;
  testing::ServerProcess server;
  if (!server.Start(kServerBinary, config, "", std::chrono::seconds(30))) {
    ADD_FAILURE() << "the server did not start:\n" << server.log();
    server.Terminate();
  } else {
    auto stub = v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                                                        grpc::InsecureChannelCredentials()));
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
    EXPECT_TRUE(server.Terminate());
  }
  served.exit_code = server.Wait(std::chrono::seconds(30));
  if (server.timed_out()) ADD_FAILURE() << "the server did not exit within 30 s of SIGTERM";
  served.log = server.log();
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

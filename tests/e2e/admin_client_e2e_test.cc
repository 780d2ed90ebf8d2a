// tools/admin_client.py against the real server (admin token on): set, get, rebuild and
// reload print the reply as JSON and exit 0; a refused call prints the gRPC code and the
// message and exits 1; without the token the server refuses it. Skipped where Debian's
// python3 lacks grpcio or grpc-tools.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct ShellResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` with /bin/sh, without LD_PRELOAD: the Python client must not inherit a
// library preloaded into this test (the TSan runs preload one that only our binaries
// can use).
ShellResult Shell(const std::string& command) {
  ShellResult run;
  FILE* pipe = popen(absl::StrCat("env -u LD_PRELOAD ", command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class AdminClientE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Shell("/usr/bin/python3 -c 'import grpc, grpc_tools'").exit_code != 0) {
      GTEST_SKIP() << "/usr/bin/python3 has no grpcio / grpc-tools (python3-grpcio, "
                      "python3-grpc-tools)";
    }
    dir_ = testing::TempDir("admin_client_e2e");
    absl::StatusOr<std::string> model =
        testing::WriteTestModel(testing::MakeRandomModel(testing::SmallSpec(1, 1, 50, 4), 5), dir_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_path_ = *model;
    token_file_ = dir_ + "/admin.token";
    std::ofstream(token_file_, std::ios::trunc) << "tok-123\n";
    std::filesystem::permissions(
        token_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
        std::filesystem::perm_options::replace);
    std::ofstream(dir_ + "/ids.txt", std::ios::trunc) << "4, 5\n6 7\n";
    const std::string yaml = absl::StrCat(
        "server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"127.0.0.1:0\"\n"
        "  admin_token_file: \"",
        token_file_,
        "\"\n  metrics_listen: \"\"\n  shutdown_grace_seconds: 2\n"
        "engine: {device: cpu, streams: 1}\ncache: {hot_rows_per_table: 8}\n"
        "model: {path: \"",
        model_path_, "\", watch_interval_seconds: 0}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "admin_client.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  ShellResult Client(const std::string& args, bool with_token = true) {
    return Shell(absl::StrCat("/usr/bin/python3 " FUSERANK_SOURCE_DIR "/tools/admin_client.py",
                              " --target 127.0.0.1:", server_->admin_port(),
                              with_token ? " --token-file " + token_file_ : "", " ", args));
  }

  std::string dir_, model_path_, token_file_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(AdminClientE2eTest, SetsGetsAndReloadsPrintingJson) {
  ShellResult run = Client(absl::StrCat("set item_0=1,2,3,53 user_0=@", dir_, "/ids.txt"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, AllOf(HasSubstr("\"version\": 1"), HasSubstr("\"table\": \"item_0\""),
                                HasSubstr("\"hot_rows\": 3"), HasSubstr("\"hot_rows\": 4"),
                                HasSubstr("\"capacity\": 8")));

  run = Client("get item_0");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, AllOf(HasSubstr("\"version\": 1"), HasSubstr("\"hot_rows\": 3"),
                                HasSubstr("\"hits\": 0")));
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("user_0")));

  run = Client("set item_0=");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, AllOf(HasSubstr("\"version\": 2"), HasSubstr("\"hot_rows\": 0")));

  run = Client("reload");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output,
              AllOf(HasSubstr("\"model\": \"small\""), HasSubstr("\"model_version\": \"7\"")));
  run = Client("get user_0");
  EXPECT_THAT(run.output, AllOf(HasSubstr("\"version\": 3"), HasSubstr("\"hot_rows\": 4")))
      << "the reload carried the set over";
}

TEST_F(AdminClientE2eTest, RefusalsPrintTheCodeAndExitOne) {
  ShellResult run = Client("set nope=1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, AllOf(HasSubstr("admin_client: NOT_FOUND"), HasSubstr("'nope'")));

  run = Client("set item_0=1,2,3,4,5,6,7,8,9");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("admin_client: INVALID_ARGUMENT"));

  run = Client("rebuild");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("admin_client: FAILED_PRECONDITION"));

  run = Client("--model other get");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("admin_client: NOT_FOUND"));

  run = Client("get", /*with_token=*/false);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("admin_client: UNAUTHENTICATED"));
}

}  // namespace
}  // namespace fuserank

// Admin auth through the real server: with server.admin_token_file set, every Admin method
// answers UNAUTHENTICATED without the token or with a wrong one and works with the right
// one; a non-loopback admin_listen without a token file, or an empty token file, refuses
// to start (in-process and as the fuserank-server binary).
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "s3cret-admin-token";

// Every Admin method, called with `authorization` metadata when it is not empty.
using AdminCall = std::function<grpc::Status(v1::Admin::Stub*, grpc::ClientContext*)>;

std::vector<std::pair<std::string, AdminCall>> AdminCalls() {
  return {
      {"SetHotRows",
       [](v1::Admin::Stub* stub, grpc::ClientContext* context) {
         v1::HotRowsStatus response;
         return stub->SetHotRows(context, v1::SetHotRowsRequest(), &response);
       }},
      {"GetHotRows",
       [](v1::Admin::Stub* stub, grpc::ClientContext* context) {
         v1::HotRowsStatus response;
         return stub->GetHotRows(context, v1::GetHotRowsRequest(), &response);
       }},
      {"RebuildHotRows",
       [](v1::Admin::Stub* stub, grpc::ClientContext* context) {
         v1::HotRowsStatus response;
         return stub->RebuildHotRows(context, v1::RebuildHotRowsRequest(), &response);
       }},
      {"ReloadModel",
       [](v1::Admin::Stub* stub, grpc::ClientContext* context) {
         v1::ReloadModelResponse response;
         return stub->ReloadModel(context, v1::ReloadModelRequest(), &response);
       }},
  };
}

class AdminAuthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("admin_auth_e2e");
    absl::StatusOr<std::string> model =
        testing::WriteTestModel(testing::MakeRandomModel(testing::SmallSpec(1, 1, 50, 4), 3), dir_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_path_ = *model;
    token_file_ = dir_ + "/admin.token";
    std::ofstream(token_file_, std::ios::trunc) << kToken << "\n";
  }

  std::string Yaml(const std::string& admin_listen, const std::string& token_file) {
    return absl::StrCat("server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"", admin_listen,
                        "\"\n  admin_token_file: \"", token_file,
                        "\"\n  metrics_listen: \"\"\n  shutdown_grace_seconds: 2\n"
                        "engine: {device: cpu, streams: 1}\n"
                        "model: {path: \"",
                        model_path_, "\", watch_interval_seconds: 0}\n");
  }

  std::unique_ptr<server::Server> Start(const std::string& admin_listen) {
    absl::StatusOr<server::Config> config =
        server::ParseConfig(Yaml(admin_listen, token_file_), "auth.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  std::string dir_;
  std::string model_path_;
  std::string token_file_;
};

TEST_F(AdminAuthE2eTest, EveryAdminMethodNeedsTheToken) {
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server->admin_port()), grpc::InsecureChannelCredentials()));
  for (const auto& [name, call] : AdminCalls()) {
    SCOPED_TRACE(name);
    {
      grpc::ClientContext context;
      const grpc::Status status = call(stub.get(), &context);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_THAT(status.error_message(), HasSubstr("no 'authorization' metadata"));
    }
    for (const char* wrong : {"Bearer wrong", "Bearer s3cret-admin-toke", "s3cret-admin-token"}) {
      grpc::ClientContext context;
      context.AddMetadata("authorization", wrong);
      const grpc::Status status = call(stub.get(), &context);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong;
      EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr(kToken)));
    }
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    const grpc::Status status = call(stub.get(), &context);
    if (name == "RebuildHotRows") {  // past the auth check: refused for cache.policy static
      EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
      EXPECT_THAT(status.error_message(), HasSubstr("cache.policy is static"));
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
  }
}

TEST_F(AdminAuthE2eTest, WithoutATokenFileLoopbackAdminNeedsNone) {
  token_file_.clear();
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server->admin_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ReloadModelResponse response;
  const grpc::Status status = stub->ReloadModel(&context, v1::ReloadModelRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model(), "small");
  EXPECT_EQ(response.model_version(), "7");
}

TEST_F(AdminAuthE2eTest, ANonLoopbackAdminAddressWithATokenServesAndChecksIt) {
  std::unique_ptr<server::Server> server = Start("0.0.0.0:0");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server->admin_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::HotRowsStatus response;
  EXPECT_EQ(stub->GetHotRows(&context, v1::GetHotRowsRequest(), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AdminAuthE2eTest, ANonLoopbackAdminAddressWithoutATokenFileRefusesToStart) {
  absl::StatusOr<server::Config> config = server::ParseConfig(Yaml("0.0.0.0:0", ""), "auth.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("auth.yaml: server.admin_listen: '0.0.0.0:0' is not a loopback address, "
                        "so server.admin_token_file must be set"));

  // The binary: exits 1 before listening, saying so.
  const std::string path = dir_ + "/open_admin.yaml";
  std::ofstream(path) << Yaml("0.0.0.0:0", "");
  FILE* pipe = popen(
      absl::StrCat(FUSERANK_BINARY_DIR "/bin/fuserank-server --config ", path, " 2>&1").c_str(),
      "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_THAT(output, HasSubstr("server.admin_token_file must be set"));
}

TEST_F(AdminAuthE2eTest, AnEmptyTokenFileRefusesToStart) {
  std::ofstream(token_file_, std::ios::trunc) << "\n";
  absl::StatusOr<server::Config> config =
      server::ParseConfig(Yaml("127.0.0.1:0", token_file_), "auth.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(),
              HasSubstr("auth.yaml: server.admin_token_file: the token is empty"));
}

}  // namespace
}  // namespace fuserank

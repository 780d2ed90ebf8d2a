// Admin auth through the real server: with server.admin_token_file set, every Admin method
// answers UNAUTHENTICATED without the token or with a wrong one and works with the right
// one, server reflection on the admin port answers only with the token, and refusals are
// logged at a bounded rate; a non-loopback admin_listen without a token file (a DNS name
// like 127.attacker.example is not loopback), a token in clear text on a non-loopback
// address without the opt-in, an empty token file or one others can read refuse to start
// (in-process and as the fuserank-server binary).
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/admin_auth.h"
#include "server/config.h"
#include "server/server.h"
#include "server/tsan_handoff.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
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
    WriteToken(std::string(kToken) + "\n");
  }

  void WriteToken(const std::string& text,
                  fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) {
    std::ofstream(token_file_, std::ios::trunc) << text;
    fs::permissions(token_file_, perms, fs::perm_options::replace);
  }

  std::string Yaml(const std::string& admin_listen, const std::string& token_file,
                   bool allow_plaintext = false) {
    return absl::StrCat("server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"", admin_listen,
                        "\"\n  admin_token_file: \"", token_file,
                        "\"\n  admin_allow_plaintext_token: ", allow_plaintext ? "true" : "false",
                        "\n  metrics_listen: \"\"\n  shutdown_grace_seconds: 2\n"
                        "engine: {device: cpu, streams: 1}\n"
                        "model: {path: \"",
                        model_path_, "\", watch_interval_seconds: 0}\n");
  }

  std::unique_ptr<server::Server> Start(const std::string& admin_listen,
                                        bool allow_plaintext = false) {
    absl::StatusOr<server::Config> config =
        server::ParseConfig(Yaml(admin_listen, token_file_, allow_plaintext), "auth.yaml");
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

// Sends `bytes` as the body of a call of `method` on `channel` (with `authorization` when
// it is not empty) and waits for the answer.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& bytes, const std::string& authorization) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!authorization.empty()) context.AddMetadata("authorization", authorization);
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  // ThreadSanitizer sees neither hand-off: gRPC's core and absl are not instrumented here.
  FUSERANK_TSAN_RELEASE(&status);
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    FUSERANK_TSAN_ACQUIRE(&status);
    status = std::move(s);
    FUSERANK_TSAN_RELEASE(&status);
    done.Notify();
  });
  done.WaitForNotification();
  FUSERANK_TSAN_ACQUIRE(&status);
  return status;
}

// The token is checked before the request's bytes are read: bytes that are no request and
// a SetHotRows far over capacity are UNAUTHENTICATED without it, INVALID_ARGUMENT with it.
TEST_F(AdminAuthE2eTest, TheTokenIsCheckedBeforeTheRequestIsRead) {
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  const std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server->admin_port()), grpc::InsecureChannelCredentials());
  v1::SetHotRowsRequest over;
  v1::TableHotRows* table = over.add_tables();
  table->set_table("item_0");
  for (int64_t id = 0; id < 100000; ++id) table->add_ids(id);
  const std::string garbage = "\xff\xff\xff\xff";
  for (const char* method : {"SetHotRows", "GetHotRows", "RebuildHotRows", "ReloadModel"}) {
    SCOPED_TRACE(method);
    const std::string path = absl::StrCat("/fuserank.v1.Admin/", method);
    grpc::Status status = RawCall(channel, path, garbage, "");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    status = RawCall(channel, path, garbage, absl::StrCat("Bearer ", kToken));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("no valid fuserank.v1."));
  }
  const std::string set = "/fuserank.v1.Admin/SetHotRows";
  grpc::Status status = RawCall(channel, set, over.SerializeAsString(), "Bearer wrong");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  status = RawCall(channel, set, over.SerializeAsString(), absl::StrCat("Bearer ", kToken));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("100000 ids, more than the hot-set capacity"));
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
  std::unique_ptr<server::Server> server = Start("0.0.0.0:0", /*allow_plaintext=*/true);
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
  const testing::ServerRun run = testing::RunServerToExit("--config " + path);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("server.admin_token_file must be set"));
}

TEST_F(AdminAuthE2eTest, AnEmptyTokenFileRefusesToStart) {
  WriteToken("\n");
  absl::StatusOr<server::Config> config =
      server::ParseConfig(Yaml("127.0.0.1:0", token_file_), "auth.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(server.status().message(),
              HasSubstr("auth.yaml: server.admin_token_file: the token is empty"));
}

TEST_F(AdminAuthE2eTest, ATokenInClearTextOnANonLoopbackAddressNeedsTheOptIn) {
  absl::StatusOr<server::Config> config =
      server::ParseConfig(Yaml("0.0.0.0:0", token_file_), "auth.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("auth.yaml: server.admin_listen: '0.0.0.0:0' is not a loopback address "
                        "and server.tls is off, so the admin token would travel in clear text"));
}

TEST_F(AdminAuthE2eTest, ADnsNameIsNoLoopbackAddress) {
  for (const char* host : {"127.attacker.example", "localhost"}) {
    absl::StatusOr<server::Config> config =
        server::ParseConfig(Yaml(absl::StrCat(host, ":0"), ""), "auth.yaml");
    ASSERT_FALSE(config.ok()) << host;
    EXPECT_THAT(config.status().message(),
                HasSubstr(absl::StrCat("server.admin_listen: '", host,
                                       ":0' is not a loopback address, so "
                                       "server.admin_token_file must be set")));
  }
}

TEST_F(AdminAuthE2eTest, ATokenFileOthersCanReadStartsWithAWarningAndGuardsAdmin) {
  WriteToken(std::string(kToken) + "\n", fs::perms::owner_read | fs::perms::owner_write |
                                             fs::perms::group_read | fs::perms::others_read);
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server->admin_port()), grpc::InsecureChannelCredentials()));
  v1::HotRowsStatus response;
  grpc::ClientContext without;
  EXPECT_EQ(stub->GetHotRows(&without, v1::GetHotRowsRequest(), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext with;
  with.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  const grpc::Status status = stub->GetHotRows(&with, v1::GetHotRowsRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// Adds `authorization: Bearer <token>` to every call of a channel.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(std::string value) : value_(std::move(value)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", value_);
    }
    methods->Proceed();
  }

 private:
  std::string value_;
};

class BearerFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerFactory(std::string value) : value_(std::move(value)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(value_);
  }

 private:
  std::string value_;
};

std::shared_ptr<grpc::Channel> ChannelWith(int port, const std::string& authorization) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  if (!authorization.empty()) factories.push_back(std::make_unique<BearerFactory>(authorization));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
      grpc::ChannelArguments(), std::move(factories));
}

TEST_F(AdminAuthE2eTest, ReflectionOnTheAdminPortNeedsTheToken) {
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  for (const std::string& wrong : {std::string(), std::string("Bearer wrong")}) {
    absl::StatusOr<std::vector<std::string>> services =
        testing::ReflectionServices(ChannelWith(server->admin_port(), wrong));
    EXPECT_FALSE(services.ok()) << "reflection answered '" << wrong << "' with "
                                << (services.ok() ? services->size() : 0) << " services";
  }
  absl::StatusOr<std::vector<std::string>> services = testing::ReflectionServices(
      ChannelWith(server->admin_port(), absl::StrCat("Bearer ", kToken)));
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, ::testing::Contains("fuserank.v1.Admin"));
  // Health stays open for probes; the public port's reflection needs no token.
  EXPECT_TRUE(testing::HealthCheck(ChannelWith(server->admin_port(), ""), "").ok());
  EXPECT_TRUE(testing::ReflectionServices(ChannelWith(server->port(), "")).ok());
}

// Captures what the in-process server logs (spdlog's default logger writes to stdout)
// into a file while it lives.
class StdoutCapture {
 public:
  explicit StdoutCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stdout);
    saved_ = ::dup(1);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::close(fd);
  }
  // Restores stdout and returns how many captured lines contain `text`.
  int Stop(const std::string& text) {
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    std::ifstream in(path_);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
    return n;
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST_F(AdminAuthE2eTest, RefusedCallsAreLoggedAtABoundedRate) {
  std::unique_ptr<server::Server> server = Start("127.0.0.1:0");
  StdoutCapture log(dir_ + "/log.txt");
  ASSERT_NE(server, nullptr);
  auto stub = v1::Admin::NewStub(ChannelWith(server->admin_port(), "Bearer wrong"));
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext context;
    v1::HotRowsStatus response;
    EXPECT_EQ(stub->GetHotRows(&context, v1::GetHotRowsRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  for (int i = 0; i < 20; ++i) {  // reflection refusals share the limit
    testing::ReflectionServices(ChannelWith(server->admin_port(), "Bearer wrong")).IgnoreError();
  }
  server.reset();
  const int lines = log.Stop("refused: ");
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, server::AdminAuth::kRefusalLogBurst) << "of 120 refused calls";
}

}  // namespace
}  // namespace fuserank

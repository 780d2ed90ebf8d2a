// SIGTERM to the real fuserank-server binary while an Admin ReloadModel of a large model
// (fuserank-gen-model, 256 MB of weights) is loading: the server waits for the reload,
// shuts down cleanly and exits 0.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process_util.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

using testing::kServerBinary;

// A reload that the checks refuse at once (a path outside the model roots) unless a
// reload runs: then RESOURCE_EXHAUSTED.
grpc::StatusCode Probe(v1::Admin::Stub* admin) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ReloadModelRequest request;
  request.set_path("/etc/hostname");
  v1::ReloadModelResponse response;
  return admin->ReloadModel(&context, request, &response).error_code();
}

TEST(ReloadSigtermTest, SigtermDuringAReloadWaitsForItAndExitsZero) {
  ASSERT_TRUE(std::filesystem::exists(kServerBinary)) << kServerBinary << " is not built";
  const std::string dir = absl::StrCat(::testing::TempDir(), "/reload_sigterm_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string spec = dir + "/big.yaml";
  const std::string gen = testing::LargeModelCommand(spec);
  ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
  const std::string config = dir + "/config.yaml";
  std::ofstream(config) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                           "metrics_listen: \"\", shutdown_grace_seconds: 2}\n"
                           "engine: {device: cpu, streams: 1}\nmodel: {path: \""
                        << spec << "\"}\n";
  testing::ServerProcess server;
  bool seen_reloading = false;
  if (!server.Start(kServerBinary, config, "", std::chrono::seconds(120)) ||
      server.admin_port() == 0) {
    ADD_FAILURE() << "the server did not start:\n" << server.log();
    server.Terminate();
  } else {
    const int port = server.admin_port();
    auto admin = v1::Admin::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    // Up to 5 reloads, until one is seen loading (a reload can end before a probe, or
    // arrive while a probe holds the reload worker).
    for (int attempt = 0; attempt < 5 && !seen_reloading; ++attempt) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      v1::ReloadModelRequest request;  // the current spec again
      v1::ReloadModelResponse response;
      grpc::Status status;
      grpc::CompletionQueue cq;
      auto reader = admin->AsyncReloadModel(&context, request, &cq);
      reader->Finish(&response, &status, &status);
      void* tag = nullptr;
      bool ok = false;
      auto answered = [&] {
        return cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now()) ==
               grpc::CompletionQueue::GOT_EVENT;
      };
      bool done = false;
      while (!(done = answered())) {
        if (Probe(admin.get()) == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          seen_reloading = true;
          EXPECT_TRUE(server.Terminate());
          break;
        }
      }
      if (!done) cq.Next(&tag, &ok);  // the reload's answer (or its cut-off) arrives
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    }
    EXPECT_TRUE(seen_reloading) << "no reload was ever seen in progress";
    if (!seen_reloading) server.Terminate();
  }
  const int exit_code = server.Wait(std::chrono::seconds(300));
  const std::string log = server.log();
  ASSERT_FALSE(server.timed_out()) << "the server did not exit after SIGTERM";
  EXPECT_EQ(exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("Terminated: shutting down"));
  EXPECT_THAT(log, HasSubstr("bye"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fuserank

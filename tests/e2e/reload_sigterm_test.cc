// SIGTERM to the real fuserank-server binary while an Admin ReloadModel of a large model
// (fuserank-gen-model, 256 MB of weights) is loading: the server waits for the reload,
// shuts down cleanly and exits 0.
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

const char kServer[] = FUSERANK_BINARY_DIR "/bin/fuserank-server";
const char kGenModel[] = FUSERANK_BINARY_DIR "/bin/fuserank-gen-model";

// Reads the child's output into `log` until the start line names the admin port.
int WaitForAdminPort(int fd, std::string* log) {
  const std::regex serving(R"(admin: \S+ \(port (\d+)\))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) return 0;
    log->append(buffer, n);
    std::smatch match;
    if (std::regex_search(*log, match, serving)) return std::stoi(match[1]);
  }
  return 0;
}

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
  ASSERT_TRUE(std::filesystem::exists(kServer)) << kServer << " is not built";
  const std::string dir = absl::StrCat(::testing::TempDir(), "/reload_sigterm_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string spec = dir + "/big.yaml";
  const std::string gen = absl::StrCat(kGenModel, " --out ", spec,
                                       " --rows 500000 --dim 64 --top_mlp 32,1 > /dev/null");
  ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
  const std::string config = dir + "/config.yaml";
  std::ofstream(config) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                           "metrics_listen: \"\", shutdown_grace_seconds: 2}\n"
                           "engine: {device: cpu, streams: 1}\nmodel: {path: \""
                        << spec << "\"}\n";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    execl(kServer, kServer, "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string log;
  const int port = WaitForAdminPort(pipe_fds[0], &log);
  bool seen_reloading = false;
  if (port == 0) {
    ADD_FAILURE() << "the server did not start:\n" << log;
  } else {
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
          EXPECT_EQ(kill(pid, SIGTERM), 0);
          break;
        }
      }
      if (!done) cq.Next(&tag, &ok);  // the reload's answer (or its cut-off) arrives
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    }
    EXPECT_TRUE(seen_reloading) << "no reload was ever seen in progress";
    if (!seen_reloading) kill(pid, SIGTERM);
  }
  int wait_status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  pid_t done = 0;
  while ((done = waitpid(pid, &wait_status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    ADD_FAILURE() << "the server did not exit after SIGTERM";
    kill(pid, SIGKILL);
    waitpid(pid, &wait_status, 0);
  }
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) log.append(buffer, n);
  close(pipe_fds[0]);
  ASSERT_NE(done, 0);
  ASSERT_TRUE(WIFEXITED(wait_status)) << log;
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << log;
  EXPECT_THAT(log, HasSubstr("Terminated: shutting down"));
  EXPECT_THAT(log, HasSubstr("bye"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fuserank

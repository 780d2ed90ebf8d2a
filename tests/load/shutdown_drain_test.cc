// Shutdown under load (ctest label `load`): the real server in-process on 127.0.0.1:0 with
// the CPU engine. A shutdown in the middle of closed-loop load at about twice what the
// server can hold fails no accepted request and every OK it sent arrives; health turns
// NOT_SERVING while the queue drains, new calls are refused at once, and the queued ones
// finish. Each test is bounded: a few seconds of load, every wait with a timeout.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/grpc_status.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/load/closed_loop_util.h"
#include "tests/load/load_server_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::AsyncCall;
using testing::CallSample;
using testing::ClosedLoopLoad;
using testing::CountCodes;
using testing::Describe;
using testing::kClients;
using testing::kLoadTopMlp;
using testing::kOneWorker;
using testing::kSlowCandidates;
using testing::kSlowTopMlp;
using testing::LoadEngineConfig;
using testing::LoadModel;
using testing::LoadOptions;
using testing::MetricValue;
using testing::PrepareWorkload;
using testing::RequestOf;
using testing::SendSlow;
using testing::Started;
using testing::StartServer;
using testing::TestModel;
using testing::Workload;

TEST(LoadTest, ShutdownUnderLoadFailsNoAcceptedRequest) {
  const TestModel model = LoadModel(12, kLoadTopMlp);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, testing::TempDir("drain"));
  ASSERT_TRUE(path.ok()) << path.status();
  Started started = StartServer(*path, LoadEngineConfig(), 64, "drain.yaml");
  ASSERT_NE(started.server, nullptr);
  const Workload workload = PrepareWorkload(model, started.target);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string before = started.server->metrics().Scrape();

  LoadOptions options;
  options.clients = kClients;
  options.backoff = absl::Milliseconds(5);
  ClosedLoopLoad load(started.target, &workload.requests, &workload.expected, options);
  load.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double shutdown_at = load.Elapsed();
  started.server->Shutdown();  // what SIGTERM does in main()
  const double shutdown_took = load.Elapsed() - shutdown_at;
  // Every client ends on a refusal: none may be left calling.
  ASSERT_TRUE(load.WaitIdle(absl::Seconds(30)));
  load.Stop();
  const std::vector<CallSample> samples = load.Samples();
  const std::string after = started.server->metrics().Scrape();

  int client_ok = 0;
  int drained = 0;  // issued before the shutdown began, answered OK after
  int mismatched = 0;
  for (const CallSample& sample : samples) {
    if (sample.code != grpc::StatusCode::OK) continue;
    ++client_ok;
    if (sample.start_s < shutdown_at && sample.start_s + sample.seconds > shutdown_at) ++drained;
    if (!sample.matched) ++mismatched;
  }
  const auto counts = CountCodes(samples);
  auto server_count = [&](const char* code) {
    const std::vector<std::string> labels = {"rpc=\"Rank\"", absl::StrCat("code=\"", code, "\"")};
    return MetricValue(after, "fuserank_requests_total", labels) -
           MetricValue(before, "fuserank_requests_total", labels);
  };
  const double server_all = MetricValue(after, "fuserank_requests_total", {"rpc=\"Rank\""}) -
                            MetricValue(before, "fuserank_requests_total", {"rpc=\"Rank\""});
  const double server_ok = server_count("OK");
  const double server_refused = server_count("RESOURCE_EXHAUSTED") + server_count("UNAVAILABLE");
  std::printf(
      "drain: shutdown at %.3f s took %.3f s; %d calls answered OK across it\n"
      "  client calls: %s\n  server: %.0f OK, %.0f refused, %.0f other\n",
      shutdown_at, shutdown_took, drained, Describe(counts).c_str(), server_ok, server_refused,
      server_all - server_ok - server_refused);

  // Accepted requests finished OK on the server, and every OK reached its client intact.
  EXPECT_EQ(server_all, server_ok + server_refused) << "an accepted request failed";
  EXPECT_EQ(server_ok, client_ok) << "a response the server finished never reached its client";
  EXPECT_EQ(mismatched, 0);
  EXPECT_GE(drained, 1) << "no request was in flight at the shutdown: the test proved nothing";
  for (const auto& [code, count] : counts) {
    // Refused: RESOURCE_EXHAUSTED before, UNAVAILABLE from the shutdown on; CANCELLED
    // only for a refusal caught by gRPC's own teardown (the server counts none of those
    // as OK, checked above).
    EXPECT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED)
        << server::GrpcCodeName(code) << " x" << count;
  }
  EXPECT_GT(counts.count(grpc::StatusCode::UNAVAILABLE), 0u) << "new calls must be refused";
  EXPECT_LT(shutdown_took, 10.0) << "the drain should take about one queue of work";
}

TEST(LoadTest, ShutdownTurnsHealthNotServingAndFinishesTheQueue) {
  const TestModel model = LoadModel(14, kSlowTopMlp);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, testing::TempDir("health"));
  ASSERT_TRUE(path.ok()) << path.status();
  Started started = StartServer(*path, kOneWorker, kSlowCandidates, "health.yaml");
  ASSERT_NE(started.server, nullptr);
  auto channel = grpc::CreateChannel(started.target, grpc::InsecureChannelCredentials());
  auto stub = v1::Ranker::NewStub(channel);
  absl::StatusOr<int> health = testing::HealthCheck(channel, "");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, 1) << "SERVING before the shutdown";

  std::vector<AsyncCall> slow(8);
  SendSlow(model, stub.get(), *started.server, &slow, 3);
  if (::testing::Test::HasFatalFailure()) return;
  std::thread stopper([&] { started.server->Shutdown(); });
  int not_serving_while_busy = 0;
  grpc::StatusCode refused = grpc::StatusCode::OK;
  for (int i = 0; i < 2000 && refused == grpc::StatusCode::OK; ++i) {
    const int done =
        static_cast<int>(std::count_if(slow.begin(), slow.end(), [](const AsyncCall& call) {
          return call.done.HasBeenNotified();
        }));
    absl::StatusOr<int> status = testing::HealthCheck(channel, "fuserank.v1.Ranker");
    if (status.ok() && *status == 2 && done < static_cast<int>(slow.size())) {
      ++not_serving_while_busy;
      // Draining: a new call is refused at once.
      refused = testing::Rank(stub.get(), RequestOf(model, 7, 8)).status.error_code();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stopper.join();
  EXPECT_GT(not_serving_while_busy, 0) << "health never said NOT_SERVING during the drain";
  EXPECT_EQ(refused, grpc::StatusCode::UNAVAILABLE);
  // Those queued or computing when the shutdown began finish OK; one the server had not
  // read yet by then is refused like any new call.
  int ok = 0;
  for (AsyncCall& call : slow) {
    ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    if (call.status.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE)
          << "a queued request was cut off: " << call.status.error_message();
    }
  }
  EXPECT_GE(ok, 3 + 1) << "the queued requests and the one computing must all finish";
}

}  // namespace
}  // namespace fuserank

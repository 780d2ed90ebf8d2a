// The load-and-fault test (ctest label `load`): the real server in-process on 127.0.0.1:0
// with the CPU engine and a small queue, under closed-loop load at about twice what it can
// hold. Overload is refused fast with RESOURCE_EXHAUSTED while accepted requests keep a
// bounded p99 and their exact answers; a flood of requests whose deadlines pass in the
// queue costs no compute. A shutdown under load: shutdown_drain_test.cc.
// Each test is bounded: a few seconds of load, every wait with a timeout.
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
using testing::kCandidates;
using testing::kCapacity;
using testing::kClients;
using testing::kLoadTopMlp;
using testing::kOneWorker;
using testing::kQueueCapacity;
using testing::kSlowCandidates;
using testing::kSlowTopMlp;
using testing::LoadEngineConfig;
using testing::LoadModel;
using testing::LoadOptions;
using testing::MetricValue;
using testing::Percentile;
using testing::PrepareWorkload;
using testing::RequestOf;
using testing::SendSlow;
using testing::Started;
using testing::StartServer;
using testing::TestModel;
using testing::Workload;

TEST(LoadTest, OverloadIsRefusedFastWhileAcceptedLatencyStaysBounded) {
  const TestModel model = LoadModel(11, kLoadTopMlp);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, testing::TempDir("load"));
  ASSERT_TRUE(path.ok()) << path.status();
  Started started = StartServer(*path, LoadEngineConfig(), 64, "load.yaml");
  ASSERT_NE(started.server, nullptr);
  const Workload workload = PrepareWorkload(model, started.target);
  ASSERT_FALSE(::testing::Test::HasFailure());

  LoadOptions options;
  options.clients = kClients;
  options.backoff = absl::Milliseconds(5);
  ClosedLoopLoad load(started.target, &workload.requests, &workload.expected, options);
  load.Start();
  double max_queue_gauge = 0;
  double max_inflight_gauge = 0;
  for (int i = 0; i < 40; ++i) {  // 4 s of load, the gauges sampled as Prometheus would
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string scrape = started.server->metrics().Scrape();
    max_queue_gauge = std::max(max_queue_gauge, MetricValue(scrape, "fuserank_queue_depth"));
    max_inflight_gauge =
        std::max(max_inflight_gauge, MetricValue(scrape, "fuserank_inflight_requests"));
  }
  load.Stop();
  ASSERT_TRUE(load.WaitIdle(absl::Seconds(30)));
  const std::vector<CallSample> samples = load.Samples();

  std::vector<double> accepted;
  std::vector<double> refused;
  int mismatched = 0;
  for (const CallSample& sample : samples) {
    if (sample.code == grpc::StatusCode::OK) accepted.push_back(sample.seconds);
    if (sample.code == grpc::StatusCode::RESOURCE_EXHAUSTED) refused.push_back(sample.seconds);
    if (!sample.matched) ++mismatched;
  }
  const auto counts = CountCodes(samples);
  const double accepted_p50 = Percentile(accepted, 0.5);
  const double accepted_p99 = Percentile(accepted, 0.99);
  const double refused_p50 = Percentile(refused, 0.5);
  const double refused_p99 = Percentile(refused, 0.99);
  // Bound: every request the server can hold ahead of an accepted one run one after
  // another at the single-request latency of the idle server, times 20 for the CPU that
  // clients, gRPC and compute share here (2 cores, often busy with other work).
  const double bound = 20 * workload.single_seconds * (kCapacity + 1);
  // The server counts a call done when gRPC says so, a moment after the client has its
  // answer.
  double inflight_after = -1;
  for (int i = 0; i < 500 && inflight_after != 0; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    inflight_after = MetricValue(started.server->metrics().Scrape(), "fuserank_inflight_requests");
  }
  const std::string scrape = started.server->metrics().Scrape();
  const double batches = MetricValue(scrape, "fuserank_batch_candidates_count");
  const double batched = MetricValue(scrape, "fuserank_batch_candidates_sum");
  std::printf(
      "load: %d clients, capacity %d requests; single request %.3f ms\n"
      "  calls: %s\n"
      "  accepted p50 %.3f ms p99 %.3f ms (bound %.1f ms); refused p50 %.3f ms p99 %.3f ms\n"
      "  %.0f batches, %.1f candidates per batch; gauges: queue depth <= %.0f, in flight <= %.0f\n",
      kClients, kCapacity, workload.single_seconds * 1e3, Describe(counts).c_str(),
      accepted_p50 * 1e3, accepted_p99 * 1e3, bound * 1e3, refused_p50 * 1e3, refused_p99 * 1e3,
      batches, batches > 0 ? batched / batches : 0.0, max_queue_gauge, max_inflight_gauge);

  EXPECT_GT(accepted.size(), 100u);
  EXPECT_GT(refused.size(), 0u) << "the load never filled the queue: not an overload";
  EXPECT_EQ(accepted.size() + refused.size(), samples.size())
      << "only OK and RESOURCE_EXHAUSTED are expected: " << Describe(counts);
  EXPECT_EQ(mismatched, 0) << "answers under load differ from the same requests alone";
  EXPECT_LT(accepted_p99, bound);
  // Refusals skip the queue and the decode: they must be far faster than accepted calls.
  EXPECT_LT(4 * refused_p50, accepted_p50);
  EXPECT_LT(2 * refused_p99, accepted_p99);
  EXPECT_GT(batched / std::max(1.0, batches), kCandidates) << "overload should merge requests";
  EXPECT_LE(max_queue_gauge, kQueueCapacity);
  EXPECT_GT(max_queue_gauge, 0);
  EXPECT_GT(max_inflight_gauge, kQueueCapacity) << "queued plus computing plus being refused";
  EXPECT_EQ(inflight_after, 0);
  started.server->Shutdown();
}

TEST(LoadTest, AFloodOfExpiredRequestsCostsNoCompute) {
  // One worker kept busy by slow requests; the flood queues behind them and expires there.
  const TestModel model = LoadModel(13, kSlowTopMlp);
  absl::StatusOr<std::string> path = testing::WriteTestModel(model, testing::TempDir("flood"));
  ASSERT_TRUE(path.ok()) << path.status();
  constexpr int kSlow = 16;
  constexpr int kFlood = 200;
  Started started = StartServer(*path, kOneWorker, kSlowCandidates, "flood.yaml");
  ASSERT_NE(started.server, nullptr);
  const std::string before = started.server->metrics().Scrape();
  auto stub =
      v1::Ranker::NewStub(grpc::CreateChannel(started.target, grpc::InsecureChannelCredentials()));
  std::vector<AsyncCall> slow(kSlow);
  // Each slow request is tens of ms of compute: 4 of them far outlast the flood's deadline.
  SendSlow(model, stub.get(), *started.server, &slow, 4);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<AsyncCall> flood(kFlood);
  for (int i = 0; i < kFlood; ++i) {
    flood[i].request = RequestOf(model, 900 + i, 16);
    flood[i].Send(stub.get(), std::chrono::milliseconds(20));
  }
  for (AsyncCall& call : slow) {
    ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  for (AsyncCall& call : flood) {
    ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  const std::string after = started.server->metrics().Scrape();

  for (AsyncCall& call : slow) EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  // Each flood request is refused at once, before it is parsed, because it would wait in
  // the queue longer than its deadline leaves (DEADLINE_EXCEEDED) or the queue is full
  // (RESOURCE_EXHAUSTED), or, admitted before the backlog showed, is dropped in the queue
  // when its deadline passes (DEADLINE_EXCEEDED).
  for (AsyncCall& call : flood) {
    const grpc::StatusCode code = call.status.error_code();
    EXPECT_TRUE(code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << code << ": " << call.status.error_message();
  }
  const double candidates = MetricValue(after, "fuserank_batch_candidates_sum") -
                            MetricValue(before, "fuserank_batch_candidates_sum");
  const double batches = MetricValue(after, "fuserank_batch_candidates_count") -
                         MetricValue(before, "fuserank_batch_candidates_count");
  auto server_count = [&](const char* code) {
    const std::vector<std::string> labels = {"rpc=\"Rank\"", absl::StrCat("code=\"", code, "\"")};
    return MetricValue(after, "fuserank_requests_total", labels) -
           MetricValue(before, "fuserank_requests_total", labels);
  };
  const double dropped = server_count("DEADLINE_EXCEEDED") + server_count("CANCELLED") +
                         server_count("RESOURCE_EXHAUSTED");
  std::printf(
      "flood: %d expired requests, %.0f refused or dropped by the server; %.0f candidates computed "
      "in %.0f batches\n",
      kFlood, dropped, candidates, batches);
  // Only the slow requests were computed, each alone: not one flood candidate.
  EXPECT_EQ(candidates, kSlow * kSlowCandidates);
  EXPECT_EQ(batches, kSlow);
  EXPECT_GT(dropped, 0) << "no flood request reached the server: the test proved nothing";
  started.server->Shutdown();
}

}  // namespace
}  // namespace fuserank

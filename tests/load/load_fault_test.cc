// The load-and-fault test (ctest label `load`): the real server in-process on 127.0.0.1:0
// with the CPU engine and a small queue, under closed-loop load at about twice what it can
// hold. Overload is refused fast with RESOURCE_EXHAUSTED while accepted requests keep a
// bounded p99 and their exact answers; a shutdown in the middle of the load fails no
// accepted request; a flood of requests whose deadlines pass in the queue costs no compute.
// Each test is bounded: a few seconds of load, every wait with a timeout.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/grpc_status.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/load/closed_loop_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::CallSample;
using testing::ClosedLoopLoad;
using testing::LoadOptions;
using testing::MetricValue;
using testing::Percentile;
using testing::TestModel;

constexpr int kQueueCapacity = 16;
constexpr int kStreams = 1;
constexpr int kCandidates = 32;           // per request
constexpr int kMaxBatchCandidates = 256;  // so a batch holds at most 8 requests
constexpr int kRequestsPerBatch = kMaxBatchCandidates / kCandidates;
// The most requests the server holds at once: a full queue plus a full batch per worker.
constexpr int kCapacity = kQueueCapacity + kStreams * kRequestsPerBatch;
constexpr int kClients = 2 * kCapacity;
// About 1 ms of compute per request here: the queue, not gRPC, sets the latency.
const std::vector<int> kLoadTopMlp = {1024, 256, 1};

// A model whose top MLP makes compute, not gRPC, the bottleneck.
TestModel LoadModel(uint64_t seed, std::vector<int> top_mlp) {
  engine::ModelSpec spec = testing::SmallSpec(2, 3, 5000, 32);
  spec.name = "load";
  spec.top_mlp = std::move(top_mlp);
  return testing::MakeRandomModel(spec, seed);
}

// A valid random request with exactly `candidates` candidates.
v1::RankRequest RequestOf(const TestModel& model, uint64_t seed, int candidates) {
  for (uint64_t s = seed;; s += 1000003) {
    v1::RankRequest request = testing::RandomRequest(model, s, 2 * candidates);
    if (request.candidates_size() < candidates) continue;
    request.mutable_candidates()->DeleteSubrange(candidates,
                                                 request.candidates_size() - candidates);
    return request;
  }
}

struct Started {
  std::unique_ptr<server::Server> server;
  std::string target;
};

Started StartServer(const std::string& model_path, const std::string& engine, int max_candidates,
                    const std::string& name) {
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\", ",
                   "max_candidates: ", max_candidates, ", shutdown_grace_seconds: 30}\n",
                   "engine: ", engine, "\nmodel: {path: \"", model_path, "\"}\n"),
      name);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  return {std::move(*server), target};
}

std::string LoadEngineConfig() {
  return absl::StrCat("{device: cpu, streams: ", kStreams, ", queue_capacity: ", kQueueCapacity,
                      ", max_batch_candidates: ", kMaxBatchCandidates, ", max_batch_wait_us: 200}");
}

// The load's requests, each checked against the double-precision reference on the idle
// server, and the exact bytes of its answer (batching must not change a bit of it).
struct Workload {
  std::vector<v1::RankRequest> requests;
  std::vector<std::string> expected;
  double single_seconds = 0;  // median latency of one request alone on the idle server
};

Workload PrepareWorkload(const TestModel& model, const std::string& target) {
  Workload workload;
  auto stub = v1::Ranker::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 64; ++i) {
    workload.requests.push_back(RequestOf(model, 100 + i, kCandidates));
    const testing::Reply reply = testing::Rank(stub.get(), workload.requests.back());
    testing::ExpectMatchesReference(model, workload.requests.back(), reply);
    workload.expected.push_back(reply.response.SerializeAsString());
  }
  std::vector<double> seconds;
  for (int i = 0; i < 60; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const testing::Reply reply = testing::Rank(stub.get(), workload.requests[i]);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
  }
  workload.single_seconds = Percentile(seconds, 0.5);
  return workload;
}

std::map<grpc::StatusCode, int> CountCodes(const std::vector<CallSample>& samples) {
  std::map<grpc::StatusCode, int> counts;
  for (const CallSample& sample : samples) ++counts[sample.code];
  return counts;
}

std::string Describe(const std::map<grpc::StatusCode, int>& counts) {
  std::string out;
  for (const auto& [code, count] : counts) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", server::GrpcCodeName(code), " ", count);
  }
  return out;
}

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

// An async Rank call the test waits for.
struct AsyncCall {
  grpc::ClientContext context;
  v1::RankRequest request;
  v1::RankResponse response;
  grpc::Status status;
  absl::Notification done;

  void Send(v1::Ranker::Stub* stub, std::chrono::milliseconds deadline) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    stub->async()->Rank(&context, &request, &response, [this](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
  }
};

// Sends `count` slow requests (a model with a wide top MLP, kSlowCandidates each) to a
// one-worker server and waits until `queued` of them wait in its queue.
constexpr int kSlowCandidates = 4096;
const std::vector<int> kSlowTopMlp = {1024, 1024, 1};
// No age limit: these requests wait in the queue for longer than the default one.
const char kOneWorker[] =
    "{device: cpu, streams: 1, queue_capacity: 512, max_batch_candidates: 4096, "
    "max_queue_delay_ms: 0}";

void SendSlow(const TestModel& model, v1::Ranker::Stub* stub, const server::Server& server,
              std::vector<AsyncCall>* calls, int queued) {
  for (size_t i = 0; i < calls->size(); ++i) {
    (*calls)[i].request = RequestOf(model, 500 + i, kSlowCandidates);
    (*calls)[i].Send(stub, std::chrono::seconds(60));
  }
  // They arrive one by one as the server reads them.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server.models().QueueDepth() < queued && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_GE(server.models().QueueDepth(), queued) << "the slow requests never queued";
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
  // Each flood request is refused at once, before it is parsed, because the queue's oldest
  // request has waited longer than its deadline leaves (RESOURCE_EXHAUSTED), or, admitted
  // before the backlog showed, is dropped in the queue when its deadline passes.
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

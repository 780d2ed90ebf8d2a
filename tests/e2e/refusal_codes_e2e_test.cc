// SPEC section 3's refusals through gRPC, on the real server in-process on 127.0.0.1:0,
// for Rank and ModelInfer alike: a deadline that passes while the request waits is
// DEADLINE_EXCEEDED and nothing of it is computed; one the predicted wait would pass is
// DEADLINE_EXCEEDED at the door, at once; a full queue is RESOURCE_EXHAUSTED at once,
// naming engine.queue_capacity. And configs SPEC allows start and serve: a batch
// budget below the request limit (a larger request runs alone), a byte limit of 100.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/kserve/infer_request.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/e2e/admission_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"

namespace fuserank {
namespace {

using testing::AsyncCall;
using ::testing::HasSubstr;
using testing::Started;

// The value of `series` in `scrape`; 0 when the series is not there yet.
double Count(const std::string& scrape, const std::string& series) {
  const double value = testing::SeriesValue(scrape, series);
  return value < 0 ? 0 : value;
}

// Polls the server's metrics until `series` reads `want` (10 s at most); its last value.
double WaitForSeries(const Started& started, const std::string& series, double want) {
  double value = -1;
  for (int i = 0; i < 1000; ++i) {
    value = Count(started.server->metrics().Scrape(), series);
    if (value == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return value;
}

// A request of `candidates` candidates (RandomRequest's, repeated).
v1::RankRequest LargeRequest(const Started& started, uint64_t seed, int candidates) {
  v1::RankRequest request = testing::RandomRequest(started.model, seed, 64);
  const int distinct = request.candidates_size();
  for (int i = distinct; i < candidates; ++i) {
    *request.add_candidates() = request.candidates(i % distinct);
  }
  return request;
}

// Starts `call` with `request` and a 60 s deadline.
void StartLongCall(v1::Ranker::Stub* stub, v1::RankRequest request, AsyncCall* call) {
  call->request = std::move(request);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  testing::StartRank(stub, call);
}

// Starts a call of 8192 candidates over a 2048-wide top MLP (about half a second on one
// worker here, longer under a sanitizer) and returns once the worker is computing it.
void StartSlowCall(const Started& started, v1::Ranker::Stub* stub, AsyncCall* slow) {
  StartLongCall(stub, LargeRequest(started, 10, 8192), slow);
  // Handed to the service; its decode (a few ms, tens under a sanitizer) and the hand-off
  // to the idle worker follow at once.
  WaitForSeries(started, "fuserank_inflight_requests", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

inference::ModelInferRequest InferRequest(const Started& started, uint64_t seed) {
  return bench::ToInferRequest(started.model.spec, testing::RandomRequest(started.model, seed, 4),
                               {});
}

TEST(RefusalCodesE2eTest, ADeadlineThatPassesInTheQueueIsDeadlineExceededAndNotComputed) {
  Started started = testing::StartAdmissionServer("deadline", "max_candidates: 8192", 2048);
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  auto kserve = inference::GRPCInferenceService::NewStub(started.channel);
  AsyncCall slow;
  StartSlowCall(started, stub.get(), &slow);
  const std::string before = started.server->metrics().Scrape();

  // Both wait behind the slow call, past their 150 ms deadlines (the batcher has not timed
  // a batch yet -- the slow call's is the first -- so it predicts no wait and admits them).
  AsyncCall hurried;
  hurried.request = testing::RandomRequest(started.model, 11, 4);
  hurried.context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
  testing::StartRank(stub.get(), &hurried);
  grpc::ClientContext infer_context;
  infer_context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
  inference::ModelInferResponse infer_response;
  const grpc::Status infer_status =
      kserve->ModelInfer(&infer_context, InferRequest(started, 12), &infer_response);
  ASSERT_TRUE(hurried.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const bool slow_done = slow.done.HasBeenNotified();
  EXPECT_EQ(hurried.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(infer_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  ASSERT_TRUE(slow.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(slow.status.ok()) << slow.status.error_message();
  EXPECT_FALSE(slow_done) << "the slow call finished within the deadlines: nothing proven";
  // The server answered both DEADLINE_EXCEEDED itself, and computed the slow batch only.
  const std::string rank_series = R"(fuserank_requests_total{code="DEADLINE_EXCEEDED",rpc="Rank"})";
  const std::string infer_series =
      R"(fuserank_requests_total{code="DEADLINE_EXCEEDED",rpc="ModelInfer"})";
  EXPECT_EQ(WaitForSeries(started, rank_series, Count(before, rank_series) + 1),
            Count(before, rank_series) + 1);
  EXPECT_EQ(WaitForSeries(started, infer_series, Count(before, infer_series) + 1),
            Count(before, infer_series) + 1);
  const std::string after = started.server->metrics().Scrape();
  EXPECT_EQ(Count(after, "fuserank_batch_candidates_count") -
                Count(before, "fuserank_batch_candidates_count"),
            1)
      << "a batch ran besides the slow call's";
  EXPECT_EQ(Count(after, "fuserank_batch_candidates_sum") -
                Count(before, "fuserank_batch_candidates_sum"),
            slow.request.candidates_size());
}

TEST(RefusalCodesE2eTest, ADeadlineShorterThanThePredictedWaitIsRefusedAtTheDoor) {
  // A 1024-wide top MLP: a batch of 8192 candidates takes some 0.1-0.2 s on one worker.
  Started started = testing::StartAdmissionServer("door", "max_candidates: 8192", 1024);
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  auto kserve = inference::GRPCInferenceService::NewStub(started.channel);
  // Eight full batches: the first runs alone, the others are sent together while it runs.
  // Each batch run teaches the batcher how long a batch takes, before the next batch is
  // picked; once the fourth has been picked, three have been timed and four wait.
  std::vector<v1::RankRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(LargeRequest(started, 20 + i, 8192));
  std::vector<AsyncCall> calls(requests.size());
  StartLongCall(stub.get(), std::move(requests[0]), &calls[0]);
  WaitForSeries(started, "fuserank_inflight_requests", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (size_t i = 1; i < calls.size(); ++i) {
    StartLongCall(stub.get(), std::move(requests[i]), &calls[i]);
  }
  WaitForSeries(started, "fuserank_batch_candidates_count", 4);  // three timed
  const std::string before = started.server->metrics().Scrape();
  const double queued = Count(before, "fuserank_queue_depth");

  // At least two batches (some 0.2 s) wait ahead: a 100 ms deadline cannot be met. The
  // server says so at once (its message; a deadline that expired on the client's side
  // would read "Deadline Exceeded").
  grpc::ClientContext rank_context;
  rank_context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  v1::RankResponse rank_response;
  const grpc::Status refused =
      stub->Rank(&rank_context, testing::RandomRequest(started.model, 30, 4), &rank_response);
  grpc::ClientContext infer_context;
  infer_context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  inference::ModelInferResponse infer_response;
  const grpc::Status infer_refused =
      kserve->ModelInfer(&infer_context, InferRequest(started, 31), &infer_response);
  ASSERT_GE(queued, 2) << "the queue drained before the refusals: nothing proven";
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("ms in the queue: it was not computed; retry with a longer deadline"));
  EXPECT_EQ(infer_refused.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(infer_refused.error_message(), HasSubstr("ms in the queue: it was not computed"));
  for (AsyncCall& call : calls) {
    ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(120)));
    EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  }
}

TEST(RefusalCodesE2eTest, AFullQueueIsResourceExhaustedAtOnceNamingItsKey) {
  Started started =
      testing::StartAdmissionServer("queue", "max_candidates: 8192", 2048, "queue_capacity: 1");
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  auto kserve = inference::GRPCInferenceService::NewStub(started.channel);
  AsyncCall slow;
  StartSlowCall(started, stub.get(), &slow);
  AsyncCall waiting;  // fills the queue of one
  waiting.request = testing::RandomRequest(started.model, 13, 4);
  waiting.context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  testing::StartRank(stub.get(), &waiting);
  WaitForSeries(started, "fuserank_queue_depth", 1);

  const testing::Reply refused =
      testing::Rank(stub.get(), testing::RandomRequest(started.model, 14, 4));
  grpc::ClientContext infer_context;
  inference::ModelInferResponse infer_response;
  const grpc::Status infer_refused =
      kserve->ModelInfer(&infer_context, InferRequest(started, 15), &infer_response);
  const bool slow_done = slow.done.HasBeenNotified();
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_THAT(refused.status.error_message(), HasSubstr("engine.queue_capacity = 1"));
  EXPECT_EQ(infer_refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << infer_refused.error_message();
  EXPECT_THAT(infer_refused.error_message(), HasSubstr("engine.queue_capacity = 1"));

  ASSERT_TRUE(slow.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(waiting.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(slow.status.ok()) << slow.status.error_message();
  EXPECT_TRUE(waiting.status.ok()) << waiting.status.error_message();
  // At once: answered while the slow call still ran, not after it.
  EXPECT_FALSE(slow_done) << "the slow call finished before the refusals: nothing proven";
}

TEST(RefusalCodesE2eTest, ABatchBudgetBelowTheRequestLimitServesALargerRequestAlone) {
  Started started =
      testing::StartAdmissionServer("budget", "max_candidates: 64", 64, "max_batch_candidates: 8");
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  int larger = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const v1::RankRequest request = testing::RandomRequest(started.model, seed, 64);
    larger += request.candidates_size() > 8;
    testing::ExpectMatchesReference(started.model, request, testing::Rank(stub.get(), request));
  }
  EXPECT_GT(larger, 0) << "no request was larger than the batch budget";
}

TEST(RefusalCodesE2eTest, ASmallByteLimitStartsAndIsNamedWhenExceeded) {
  Started started = testing::StartAdmissionServer("bytes", "max_request_bytes: 100", 64);
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  v1::RankRequest request;
  for (uint64_t seed = 3; request.ByteSizeLong() <= 100 && seed < 100; ++seed) {
    request = testing::RandomRequest(started.model, seed, 64);
  }
  ASSERT_GT(request.ByteSizeLong(), 100u);
  const testing::Reply refused = testing::Rank(stub.get(), request);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("server.max_request_bytes (100)"));
  // The user's part alone (no candidates): OK, an empty list, within the limit.
  v1::RankRequest user_only = testing::RandomRequest(started.model, 1, 1);
  user_only.clear_candidates();
  ASSERT_LE(user_only.ByteSizeLong(), 100u);
  const testing::Reply empty = testing::Rank(stub.get(), user_only);
  EXPECT_TRUE(empty.status.ok()) << empty.status.error_message();
  EXPECT_EQ(empty.response.items_size(), 0);
}

}  // namespace
}  // namespace fuserank

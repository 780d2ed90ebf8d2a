// Admission on the real server in-process on 127.0.0.1:0: a Rank or ModelInfer call whose
// message never arrived is CANCELLED (or, when the client half-closed without one,
// INVALID_ARGUMENT saying so), never "not a valid RankRequest", and the metrics count it
// so, even when gRPC reports the cancellation only after the handler ran; the bound on
// calls in flight on the ranking port (Rank and ModelInfer together) refuses at once with
// RESOURCE_EXHAUSTED naming server.max_inflight_requests while the calls it holds finish.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "bench/kserve/infer_request.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/admission_util.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using testing::AsyncCall;
using ::testing::HasSubstr;
using testing::Started;

// One RPC of the ranking port, opened raw.
struct RawRpc {
  std::string name;     // its `rpc` label
  std::string method;   // its gRPC path
  std::string message;  // its INVALID_ARGUMENT for a half-closed call without a message
};

void PrintTo(const RawRpc& rpc, std::ostream* os) { *os << rpc.name; }

// Opens a raw call of `rpc`, sends no message, and either cancels it or half-closes it.
void CallWithoutAMessage(grpc::GenericStub* stub, const RawRpc& rpc, bool cancel) {
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub->PrepareCall(&context, rpc.method, &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  if (cancel) {
    // Give the server time to see the call before the cancellation reaches it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    context.TryCancel();
  } else {
    call->WritesDone(reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(3)) {
  }
  if (!cancel) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(rpc.message));
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

class NoMessageE2eTest : public ::testing::TestWithParam<RawRpc> {};

// Rank's since 9865cf0; ModelInfer counted these INVALID_ARGUMENT until it did the same.
TEST_P(NoMessageE2eTest, ACallWhoseMessageNeverArrivedIsCancelledNotInvalid) {
  const RawRpc& rpc = GetParam();
  Started started = testing::StartAdmissionServer("nomessage", "");
  ASSERT_NE(started.server, nullptr);
  grpc::GenericStub stub(started.channel);
  auto count = [&rpc](const std::string& scrape, const std::string& code) {
    return testing::RequestCount(scrape, rpc.name, code);
  };
  const std::string before = started.server->metrics().Scrape();
  constexpr int kCalls = 10;
  for (int i = 0; i < kCalls; ++i) CallWithoutAMessage(&stub, rpc, /*cancel=*/true);
  // The server counts a call once gRPC reports it done, a moment after the client.
  std::string after;
  for (int i = 0; i < 200; ++i) {
    after = started.server->metrics().Scrape();
    if (count(after, "CANCELLED") - count(before, "CANCELLED") >= kCalls) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(count(after, "INVALID_ARGUMENT") - count(before, "INVALID_ARGUMENT"), 0);
  EXPECT_EQ(count(after, "CANCELLED") - count(before, "CANCELLED"), kCalls);

  CallWithoutAMessage(&stub, rpc, /*cancel=*/false);  // no message, not cancelled: a bad call
  for (int i = 0; i < 200; ++i) {
    after = started.server->metrics().Scrape();
    if (count(after, "INVALID_ARGUMENT") - count(before, "INVALID_ARGUMENT") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(count(after, "INVALID_ARGUMENT") - count(before, "INVALID_ARGUMENT"), 1);
  const v1::RankRequest request = testing::RandomRequest(started.model, 3, 8);
  testing::ExpectMatchesReference(
      started.model, request, testing::Rank(v1::Ranker::NewStub(started.channel).get(), request));
}

INSTANTIATE_TEST_SUITE_P(
    RankingPort, NoMessageE2eTest,
    ::testing::Values(RawRpc{"Rank", "/fuserank.v1.Ranker/Rank",
                             "the call carried no fuserank.v1.RankRequest message"},
                      RawRpc{"ModelInfer", "/inference.GRPCInferenceService/ModelInfer",
                             "the call carried no inference.ModelInferRequest message"}),
    [](const ::testing::TestParamInfo<RawRpc>& info) { return info.param.name; });

TEST(AdmissionE2eTest, TheInflightBoundRefusesAtOnceNamingItsKey) {
  // A top MLP of 2048 x 2048: two calls of 4096 candidates take a few hundred ms each on
  // one worker (some 35 GFLOP each), so they are in flight together for that long, on a
  // fast machine too (with 512 x 512 the window was a few ms, and missed a third of the
  // time on an AVX-512 machine).
  Started started = testing::StartAdmissionServer(
      "inflight", "max_candidates: 4096, max_inflight_requests: 2", 2048);
  ASSERT_NE(started.server, nullptr);
  auto stub = v1::Ranker::NewStub(started.channel);
  std::vector<AsyncCall> slow(2);
  for (size_t i = 0; i < slow.size(); ++i) {
    AsyncCall& call = slow[i];
    call.request = testing::RandomRequest(started.model, 10 + i, 8000);
    while (call.request.candidates_size() > 4096) call.request.mutable_candidates()->RemoveLast();
    call.context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    testing::StartRank(stub.get(), &call);
  }
  // Both are in flight once the server has handed them to Rank().
  for (int i = 0; i < 5000; ++i) {
    const std::string scrape = started.server->metrics().Scrape();
    if (scrape.find("fuserank_inflight_requests 2") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const testing::Reply refused =
      testing::Rank(stub.get(), testing::RandomRequest(started.model, 20, 4));
  // The bound is the ranking port's: a ModelInfer call is refused by the same count.
  auto kserve = inference::GRPCInferenceService::NewStub(started.channel);
  grpc::ClientContext infer_context;
  inference::ModelInferResponse infer_response;
  const grpc::Status infer_refused = kserve->ModelInfer(
      &infer_context,
      bench::ToInferRequest(started.model.spec, testing::RandomRequest(started.model, 22, 4), {}),
      &infer_response);
  // Both refusals proved something only if both slow calls were still in flight after
  // them, as the server counts: then they were when the refused calls arrived. The gauge
  // counts a refused call too until its OnDone, a moment after the client has its answer.
  double inflight = -1;
  for (int i = 0; i < 1000; ++i) {
    inflight =
        testing::SeriesValue(started.server->metrics().Scrape(), "fuserank_inflight_requests");
    if (inflight <= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool slow_done = inflight != 2;
  if (!slow_done) {
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << refused.status.error_message();
    EXPECT_THAT(refused.status.error_message(), HasSubstr("server.max_inflight_requests = 2"));
    EXPECT_EQ(infer_refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << infer_refused.error_message();
    EXPECT_THAT(infer_refused.error_message(), HasSubstr("server.max_inflight_requests = 2"));
  }
  for (AsyncCall& call : slow) {
    ASSERT_TRUE(call.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  // Scored as the same request is when sent alone (the double-precision reference over
  // this MLP would take seconds; scoring is checked against it elsewhere). A call the
  // client has seen end may count as in flight a moment longer: refusals are retried.
  for (AsyncCall& call : slow) {
    ASSERT_TRUE(call.status.ok()) << call.status.error_message();
    testing::Reply alone = testing::Rank(stub.get(), call.request);
    for (int i = 0; i < 100 && alone.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      alone = testing::Rank(stub.get(), call.request);
    }
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
    ASSERT_EQ(call.response.items_size(), alone.response.items_size());
    EXPECT_GT(call.response.items_size(), 0);
    for (int i = 0; i < call.response.items_size(); ++i) {
      EXPECT_EQ(call.response.items(i).item_id(), alone.response.items(i).item_id()) << i;
      EXPECT_EQ(call.response.items(i).score(), alone.response.items(i).score()) << i;
    }
  }
  EXPECT_FALSE(slow_done) << "fuserank_inflight_requests read " << inflight
                          << " after the refusals, not the 2 slow calls: a slow call finished "
                             "before the others arrived, nothing proven";
  const v1::RankRequest after = testing::RandomRequest(started.model, 21, 4);
  testing::ExpectMatchesReference(started.model, after, testing::Rank(stub.get(), after));
}

}  // namespace
}  // namespace fuserank

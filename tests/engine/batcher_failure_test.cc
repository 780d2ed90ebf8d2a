// Tests of engine/batcher on a fake backend that fails or breaks its promise: a backend
// error reaching every request of its batch, requests refused by validation, and the
// invariants (well-formed results, one request per submitted batch) that abort.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/batcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/fake_backend_util.h"
#include "tests/engine/fake_time_source_util.h"

namespace fuserank::engine::test {
namespace {

using ::testing::HasSubstr;

TEST(BatcherTest, ABackendErrorReachesEveryRequestOfTheBatch) {
  std::vector<Outcome> outcomes(3);
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  backend.set_fail(true);
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)).ok());
  }
  backend.Open();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInternal);
    EXPECT_TRUE(outcome.items.empty());
  }
}

// A backend's results are its promise (one well-formed slice per request): a broken one is
// a bug that aborts, not an error handed to the callers.
TEST(BatcherDeathTest, MalformedBackendResultsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Outcome outcome;
        FakeBackend backend(1);
        backend.set_malformed(true);
        Batcher batcher(&backend, {});
        static_cast<void>(
            batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)));
        outcome.done.WaitForNotificationWithTimeout(kPatience);
      },
      "the backend fake returned malformed results for 0 requests, expected 1");
}

TEST(BatcherTest, RefusesAnInvalidRequestWithItsMessageWithoutCallingDone) {
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  bool called = false;
  auto done = [&called](const absl::Status&, const RequestResult&) { called = true; };
  std::unique_ptr<Batch> bad = MakeRequest(&batcher, {1.0f, 2.0f}, 1);
  bad->item_dense.pop_back();
  const absl::Status refused = batcher.Submit(std::move(bad), kNoDeadline, done);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("batch: dense features of the wrong size"));
  std::unique_ptr<Batch> modelless = MakeRequest(&batcher, {1.0f}, 1);
  modelless->model.reset();
  absl::StatusOr<AdmissionTicket> ticket = batcher.Admit(kNoDeadline, 1);
  ASSERT_TRUE(ticket.ok());
  const absl::Status no_model =
      batcher.Submit(std::move(modelless), kNoDeadline, done, nullptr, std::move(*ticket));
  EXPECT_EQ(no_model.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_model.message()), HasSubstr("batch: no model"));
  batcher.Shutdown();
  EXPECT_FALSE(called);
  EXPECT_TRUE(backend.runs().empty());
  EXPECT_EQ(batcher.Admission().code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherDeathTest, ABatchThatIsNotOneRequestAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  EXPECT_DEATH(static_cast<void>(batcher.Submit(batcher.AcquireBatch(), kNoDeadline, nullptr)),
               "Batcher::Submit takes one request with candidates");
}

}  // namespace
}  // namespace fuserank::engine::test

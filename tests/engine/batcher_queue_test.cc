// Tests of engine/batcher's queue on a fake backend: expired and cancelled requests
// dropped without compute, the bounded queue refusing at once, and shutdown completing
// what is queued. Time is a fake clock the tests advance (fake_time_source_util.h).
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

TEST(BatcherTest, ExpiredAndCancelledRequestsAreDroppedWithoutCompute) {
  Outcome blocker;
  Outcome expiring;   // 7 candidates, a deadline that passes while it waits
  Outcome cancelled;  // 5 candidates, cancelled while it waits
  Outcome kept;       // 3 candidates
  std::atomic<bool> cancel{false};
  std::atomic<bool> keep{false};
  FakeBackend backend(1);
  FakeTimeSource time;
  Batcher batcher(&backend, {}, &time);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  ASSERT_TRUE(batcher
                  .Submit(MakeRequest(&batcher, 7), time.Now() + std::chrono::milliseconds(20),
                          Record(&expiring))
                  .ok());
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, 5), kNoDeadline, Record(&cancelled), &cancel).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 3), kNoDeadline, Record(&kept), &keep).ok());
  cancel = true;  // the second request's client gives up while it waits
  time.Advance(std::chrono::milliseconds(50));  // past the first one's deadline
  backend.Open();
  ASSERT_TRUE(expiring.done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(cancelled.done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(kept.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(expiring.status.code(), absl::StatusCode::kDeadlineExceeded) << expiring.status;
  EXPECT_THAT(std::string(expiring.status.message()), HasSubstr("not computed"));
  EXPECT_EQ(cancelled.status.code(), absl::StatusCode::kCancelled) << cancelled.status;
  EXPECT_THAT(std::string(cancelled.status.message()), HasSubstr("not computed"));
  EXPECT_TRUE(kept.status.ok()) << kept.status;
  EXPECT_EQ(backend.candidates_run(), 1 + 3) << "only the blocker and the kept request run";
}

TEST(BatcherTest, OnlyRequestsStillWantedAreComputed) {
  constexpr int kRequests = 40;
  std::vector<Outcome> outcomes(kRequests);
  std::vector<std::atomic<bool>> cancels(kRequests);
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  int wanted_candidates = 0;
  for (int i = 0; i < kRequests; ++i) {
    // Every third expires, every third is cancelled, the rest (i % 3 == 2) are wanted.
    const auto deadline =
        i % 3 == 0 ? BatcherClock::now() - std::chrono::milliseconds(1) : kNoDeadline;
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, i + 1), deadline, Record(&outcomes[i]), &cancels[i])
            .ok());
    if (i % 3 == 1) cancels[i] = true;
    if (i % 3 == 2) wanted_candidates += i + 1;
  }
  backend.Open();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(outcomes[i].done.WaitForNotificationWithTimeout(kPatience));
    const absl::StatusCode expected = i % 3 == 0   ? absl::StatusCode::kDeadlineExceeded
                                      : i % 3 == 1 ? absl::StatusCode::kCancelled
                                                   : absl::StatusCode::kOk;
    EXPECT_EQ(outcomes[i].status.code(), expected) << "request " << i << ": " << outcomes[i].status;
  }
  EXPECT_EQ(backend.candidates_run(), 1 + wanted_candidates);
}

TEST(BatcherTest, AFullQueueIsRefusedAtOnceNamingTheLimit) {
  std::vector<Outcome> outcomes(3);
  FakeBackend backend(1, /*gated=*/true);
  BatcherOptions options;
  options.queue_capacity = 2;
  Batcher batcher(&backend, options);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[0])).ok());
  backend.WaitRunning(1);  // the worker holds request 0; the queue is empty again
  EXPECT_TRUE(batcher.Admission().ok());
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[1])).ok());
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[2])).ok());
  // The worker is still held: the refusal cannot have waited for room.
  const absl::Status early = batcher.Admission();
  EXPECT_EQ(early.code(), absl::StatusCode::kResourceExhausted);
  bool called = false;
  const absl::Status full =
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline,
                     [&called](const absl::Status&, const RequestResult&) { called = true; });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("engine.queue_capacity = 2"));
  EXPECT_EQ(backend.runs().size(), 1u);
  backend.Open();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok());
  }
  batcher.Shutdown();
  EXPECT_FALSE(called);
  EXPECT_EQ(batcher.Admission().code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherTest, ShutdownCompletesQueuedRequestsThenRefusesNewOnes) {
  std::vector<Outcome> outcomes(5);
  FakeBackend backend(1, /*gated=*/true);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {2.0f, 3.0f}, 1), kNoDeadline, Record(&outcome)).ok());
  }
  std::thread opener([&] {
    backend.WaitRunning(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    backend.Open();
  });
  batcher.Shutdown();
  opener.join();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.HasBeenNotified());
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
    ASSERT_EQ(outcome.items.size(), 1u);
    EXPECT_EQ(outcome.items[0].index, 1u);
  }
  int computed = 0;
  for (const RunRecord& run : backend.runs()) computed += run.requests;
  EXPECT_EQ(computed, 5);
  const absl::Status late =
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[0]));
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherTest, AnExpiredRequestIsNotComputed) {
  Outcome outcome;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(batcher
                  .Submit(MakeRequest(&batcher, {1.0f}, 1),
                          BatcherClock::now() - std::chrono::milliseconds(1), Record(&outcome))
                  .ok());
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("not computed"));
  EXPECT_TRUE(backend.runs().empty());
}

}  // namespace
}  // namespace fuserank::engine::test

// Tests of engine/batcher's dynamic batching on a fake backend: results split back per
// request, merging behind a busy worker, max_batch_candidates, max_batch_wait_us and when
// a batch does not wait, model separation, one batch per worker, pooled batches. Time is a
// fake clock the tests advance (fake_time_source_util.h) wherever a duration matters.
// batcher_queue_test.cc has the queue (expiry, cancellation, its bound, shutdown),
// batcher_failure_test.cc errors and invariants, batcher_engine_test.cc the CPU engine.
#include "engine/batcher.h"

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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/fake_backend_util.h"
#include "tests/engine/fake_time_source_util.h"

namespace fuserank::engine::test {
namespace {

using ::testing::ElementsAre;

TEST(BatcherTest, SplitsResultsBackPerRequest) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<Outcome> outcomes(kThreads * kPerThread);
  FakeBackend backend(3);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        // Request `id` has id % 5 + 1 candidates scoring id, id + 0.5, ...; top-2.
        std::vector<float> scores;
        for (int c = 0; c <= id % 5; ++c) scores.push_back(id + 0.5f * c);
        const uint32_t top_k = std::min<uint32_t>(2, scores.size());
        ASSERT_TRUE(
            batcher.Submit(MakeRequest(&batcher, scores, top_k), kNoDeadline, Record(&outcomes[id]))
                .ok());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int id = 0; id < kThreads * kPerThread; ++id) {
    Outcome& outcome = outcomes[id];
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const int n = id % 5 + 1;
    ASSERT_EQ(outcome.items.size(), static_cast<size_t>(std::min(2, n))) << "request " << id;
    EXPECT_EQ(outcome.items[0].index, static_cast<uint32_t>(n - 1));
    EXPECT_EQ(outcome.items[0].score, id + 0.5f * (n - 1));
    EXPECT_GE(outcome.queue_seconds, 0.0);
    EXPECT_GE(outcome.batch_candidates, n);
  }
}

TEST(BatcherTest, MergesRequestsQueuedBehindABusyWorker) {
  std::vector<Outcome> outcomes(6);
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  // Request i has i + 1 candidates scoring 10 * i + c; top-2 of them.
  for (int i = 0; i < 6; ++i) {
    std::vector<float> scores;
    for (int c = 0; c <= i; ++c) scores.push_back(10.0f * i + c);
    ASSERT_TRUE(batcher
                    .Submit(MakeRequest(&batcher, scores, std::min(2, i + 1)), kNoDeadline,
                            Record(&outcomes[i]))
                    .ok());
  }
  EXPECT_EQ(batcher.queue_depth(), 6);
  backend.Open();
  for (int i = 0; i < 6; ++i) {
    Outcome& outcome = outcomes[i];
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_EQ(outcome.batch_requests, 6);
    EXPECT_EQ(outcome.batch_candidates, 21);
    EXPECT_EQ(outcome.position, i);
    ASSERT_EQ(outcome.items.size(), static_cast<size_t>(std::min(2, i + 1)));
    // Indices are the request's own, whatever its place in the merged batch.
    EXPECT_EQ(outcome.items[0].index, static_cast<uint32_t>(i));
    EXPECT_EQ(outcome.items[0].score, 10.0f * i + i);
  }
  const std::vector<RunRecord> runs = backend.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].requests, 6);
  EXPECT_EQ(batcher.queue_depth(), 0);
}

// A backend may stop waiting (the remote fetch) once no request of its batch can use the
// answer: past the latest deadline, not the earliest (which would fail the others).
TEST(BatcherTest, ABatchCarriesTheLatestDeadlineOfItsRequests) {
  std::vector<Outcome> outcomes(3);
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  const BatcherClock::time_point now = BatcherClock::now();
  const BatcherClock::time_point deadlines[] = {now + std::chrono::seconds(60),
                                                now + std::chrono::seconds(120),
                                                now + std::chrono::seconds(90)};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), deadlines[i], Record(&outcomes[i])).ok());
  }
  backend.Open();
  for (Outcome& outcome : outcomes)
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  const std::vector<RunRecord> runs = backend.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].deadline, kNoDeadline);  // the blocker alone, without a deadline
  EXPECT_EQ(runs[1].requests, 3);
  EXPECT_EQ(runs[1].deadline, deadlines[1]);
}

TEST(BatcherTest, RespectsMaxBatchCandidatesWithoutSplittingRequests) {
  // 3+3+3 | 4+4 | 12 (alone: larger than the limit) | 3+3
  const std::vector<int> sizes = {3, 3, 3, 4, 4, 12, 3, 3};
  Outcome blocker;
  std::vector<Outcome> outcomes(sizes.size());
  FakeBackend backend(1);
  BatcherOptions options;
  options.max_batch_candidates = 10;
  Batcher batcher(&backend, options);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, sizes[i]), kNoDeadline, Record(&outcomes[i])).ok());
  }
  backend.Open();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  }
  std::vector<int> batch_sizes;
  for (const RunRecord& run : backend.runs()) batch_sizes.push_back(run.candidates);
  EXPECT_THAT(batch_sizes, ElementsAre(1, 9, 8, 12, 6));
}

// On the fake clock: the batch forms when, and only when, its oldest request has waited
// exactly max_batch_wait_us (were it to wait longer, the clock would never get there).
TEST(BatcherTest, TheLastFreeWorkerWaitsMaxBatchWaitForCompany) {
  Outcome blocker;
  Outcome first;
  Outcome second;
  FakeBackend backend(2);
  FakeTimeSource time;
  BatcherOptions options;
  options.max_batch_wait_us = 300000;
  Batcher batcher(&backend, options, &time);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);  // one worker computes; the other is the last free one
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 2), kNoDeadline, Record(&first)).ok());
  time.Advance(std::chrono::milliseconds(50));
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 3), kNoDeadline, Record(&second)).ok());
  EXPECT_FALSE(first.done.HasBeenNotified());
  time.Advance(std::chrono::milliseconds(250));  // the first has waited 300 ms now
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(second.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(first.status.ok()) << first.status;
  EXPECT_TRUE(second.status.ok()) << second.status;
  // Both went in one batch, formed when the first had waited max_batch_wait_us.
  EXPECT_EQ(first.batch_requests, 2);
  EXPECT_EQ(second.batch_candidates, 5);
  EXPECT_DOUBLE_EQ(first.queue_seconds, 0.3);
  EXPECT_DOUBLE_EQ(second.queue_seconds, 0.25);
  backend.Open();
  ASSERT_TRUE(blocker.done.WaitForNotificationWithTimeout(kPatience));
}

// The situations in which a batch goes at once whatever max_batch_wait_us says.
enum class NoWait { kIdleServer, kOneWorkerOnly, kAnotherWorkerFree, kBatchFull };

class BatcherNoWaitTest : public ::testing::TestWithParam<NoWait> {};

std::string NoWaitName(const ::testing::TestParamInfo<NoWait>& info) {
  const char* names[] = {"IdleServer", "OneWorkerOnly", "AnotherWorkerFree", "BatchFull"};
  return names[static_cast<int>(info.param)];
}

TEST_P(BatcherNoWaitTest, DispatchesWithoutWaiting) {
  const NoWait situation = GetParam();
  Outcome blocker;
  std::vector<Outcome> outcomes(situation == NoWait::kBatchFull ? 2 : 1);
  const int workers = situation == NoWait::kOneWorkerOnly       ? 1
                      : situation == NoWait::kAnotherWorkerFree ? 3
                                                                : 2;
  FakeBackend backend(workers);
  // The fake clock never moves: a batch that waited for company would never form.
  FakeTimeSource time;
  BatcherOptions options;
  options.max_batch_wait_us = 1000000;  // the longest allowed: 1 s
  options.max_batch_candidates = 4;
  Batcher batcher(&backend, options, &time);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  if (situation == NoWait::kAnotherWorkerFree || situation == NoWait::kBatchFull) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
    backend.WaitRunning(1);
  }
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 2), kNoDeadline, Record(&outcome)).ok());
  }
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_EQ(outcome.queue_seconds, 0.0) << "waited for company it could not use";
  }
  if (situation == NoWait::kBatchFull) {
    EXPECT_EQ(outcomes[0].batch_requests, 2);
  }
  backend.Open();
}

INSTANTIATE_TEST_SUITE_P(Situations, BatcherNoWaitTest,
                         ::testing::Values(NoWait::kIdleServer, NoWait::kOneWorkerOnly,
                                           NoWait::kAnotherWorkerFree, NoWait::kBatchFull),
                         NoWaitName);

TEST(BatcherTest, NeverMergesRequestsOfDifferentModels) {
  const std::shared_ptr<const Model> a = DenseScoreModel(/*seed=*/1);
  const std::shared_ptr<const Model> b = DenseScoreModel(/*seed=*/2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<std::shared_ptr<const Model>> order = {a, a, b, b, b, a};
  std::vector<Outcome> outcomes(order.size());
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_NO_FATAL_FAILURE(HoldTheWorker(batcher, backend, &blocker));
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_TRUE(batcher
                    .Submit(MakeRequest(&batcher, {1.0f, 2.0f}, 1, order[i]), kNoDeadline,
                            Record(&outcomes[i]))
                    .ok());
  }
  backend.Open();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  }
  const std::vector<RunRecord> runs = backend.runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[1].model, a.get());
  EXPECT_EQ(runs[1].requests, 2);
  EXPECT_EQ(runs[2].model, b.get());
  EXPECT_EQ(runs[2].requests, 3);
  EXPECT_EQ(runs[3].model, a.get());
  EXPECT_EQ(runs[3].requests, 1);
}

TEST(BatcherTest, RunsOneBatchPerWorkerAtATime) {
  std::vector<Outcome> outcomes(3);
  std::vector<Outcome> queued(4);
  FakeBackend backend(3, /*gated=*/true);
  BatcherOptions options;
  options.max_batch_wait_us = 0;
  Batcher batcher(&backend, options);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)).ok());
    // One at a time, so that each idle worker takes one.
    backend.WaitRunning(static_cast<int>(&outcome - outcomes.data()) + 1);
  }
  for (Outcome& outcome : queued) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)).ok());
  }
  EXPECT_EQ(batcher.queue_depth(), 4);
  backend.Open();
  for (Outcome& outcome : outcomes)
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  for (Outcome& outcome : queued)
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(backend.max_running(), 3);
  EXPECT_EQ(batcher.queue_depth(), 0);
}

TEST(BatcherTest, ReusesPooledBatches) {
  Outcome outcome;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  std::unique_ptr<Batch> first = MakeRequest(&batcher, {1.0f, 2.0f}, 2);
  const Batch* address = first.get();
  ASSERT_TRUE(batcher.Submit(std::move(first), kNoDeadline, Record(&outcome)).ok());
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  batcher.Shutdown();  // Complete() returns the batch to the pool after the callback
  std::unique_ptr<Batch> again = batcher.AcquireBatch();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(again->num_requests(), 0);
  EXPECT_TRUE(again->item_dense.empty());
  EXPECT_GE(again->item_dense.capacity(), 2u);
}

}  // namespace
}  // namespace fuserank::engine::test

// Tests of engine/batcher on a fake backend: results split back per request, dynamic
// batching (merging, max_batch_candidates, max_batch_wait_us, when it does not wait, model
// separation), expired and cancelled requests dropped without compute, the bounded queue,
// shutdown, pooling, requests refused by validation and the invariants that abort. Time is
// a fake clock the tests advance (fake_time_source_util.h) wherever a duration matters.
// batcher_engine_test.cc has the CPU engine and allocation tests.
#include "engine/batcher.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/fake_time_source_util.h"

namespace fuserank::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A candidate scoring this holds its batch's Run() until Open().
constexpr float kHold = -1.0f;
constexpr auto kNoDeadline = BatcherClock::time_point::max();

// What one Run() saw.
struct RunRecord {
  int requests = 0;
  int candidates = 0;
  const Model* model = nullptr;
};

// Scores candidate c with item_dense[c] and returns every candidate of a request, best
// first (its top_k of them). Holds a Run() until Open() when built gated, or when the
// batch's first candidate scores kHold. Records every Run().
class FakeBackend : public Backend {
 public:
  explicit FakeBackend(int workers, bool gated = false) : workers_(workers), gated_(gated) {}

  std::string device() const override { return "fake"; }
  int num_workers() const override { return workers_; }

  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override {
    {
      absl::MutexLock lock(&mu_);
      EXPECT_TRUE(busy_workers_.insert(worker).second) << "two runs on worker " << worker;
      ++running_;
      max_running_ = std::max(max_running_, running_);
      runs_.push_back({batch.num_requests(), batch.num_candidates(), batch.model.get()});
      const bool hold = gated_ || (!batch.item_dense.empty() && batch.item_dense[0] == kHold);
      auto open = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !hold || open_; };
      mu_.Await(absl::Condition(&open));
    }
    absl::Status status = fail_ ? absl::InternalError("backend broke") : absl::OkStatus();
    for (int r = 0; r < batch.num_requests() && status.ok(); ++r) {
      const uint32_t begin = batch.candidate_begin[r];
      const uint32_t end = batch.candidate_begin[r + 1];
      std::vector<ScoredIndex> items;
      for (uint32_t c = begin; c < end; ++c) items.push_back({c - begin, batch.item_dense[c]});
      std::stable_sort(items.begin(), items.end(), [](const ScoredIndex& a, const ScoredIndex& b) {
        return a.score > b.score;
      });
      items.resize(batch.top_k[r]);
      result->items.insert(result->items.end(), items.begin(), items.end());
      result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    }
    if (malformed_) result->result_begin.pop_back();
    result->stages.dnn = 0.5;
    absl::MutexLock lock(&mu_);
    busy_workers_.erase(worker);
    --running_;
    return status;
  }

  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void WaitRunning(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return running_ >= n; };
    mu_.Await(absl::Condition(&enough));
  }
  std::vector<RunRecord> runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }
  int candidates_run() {
    absl::MutexLock lock(&mu_);
    int total = 0;
    for (const RunRecord& run : runs_) total += run.candidates;
    return total;
  }
  int max_running() {
    absl::MutexLock lock(&mu_);
    return max_running_;
  }
  void set_fail(bool fail) { fail_ = fail; }
  void set_malformed(bool malformed) { malformed_ = malformed; }

 private:
  const int workers_;
  const bool gated_;
  std::atomic<bool> fail_{false};
  std::atomic<bool> malformed_{false};
  absl::Mutex mu_;
  bool open_ = false;
  int running_ = 0;
  int max_running_ = 0;
  std::vector<RunRecord> runs_;
  std::set<int> busy_workers_;
};

// What the requests of these tests are for, unless a test names another model.
const std::shared_ptr<const Model>& DefaultModel() {
  static const std::shared_ptr<const Model>* const model =
      new std::shared_ptr<const Model>(test::DenseScoreModel());
  return *model;
}

// A one-request batch whose candidate c scores `scores[c]`.
std::unique_ptr<Batch> MakeRequest(Batcher* batcher, const std::vector<float>& scores,
                                   uint32_t top_k, std::shared_ptr<const Model> model = nullptr) {
  std::unique_ptr<Batch> batch = batcher->AcquireBatch();
  batch->model = model != nullptr ? std::move(model) : DefaultModel();
  batch->candidate_begin.push_back(static_cast<uint32_t>(scores.size()));
  batch->top_k.push_back(top_k);
  batch->item_dense = scores;
  return batch;
}

std::unique_ptr<Batch> MakeRequest(Batcher* batcher, int candidates) {
  return MakeRequest(batcher, std::vector<float>(candidates, 1.0f), 1);
}

struct Outcome {
  absl::Notification done;
  absl::Status status;
  std::vector<ScoredIndex> items;
  double queue_seconds = -1;
  int batch_candidates = 0;
  int batch_requests = 0;
  int position = -1;
};

RequestDone Record(Outcome* outcome) {
  return [outcome](const absl::Status& status, const RequestResult& result) {
    outcome->status = status;
    outcome->items.assign(result.items.begin(), result.items.end());
    outcome->queue_seconds = result.queue_seconds;
    outcome->batch_candidates = result.batch_candidates;
    outcome->batch_requests = result.batch_requests;
    outcome->position = result.position;
    outcome->done.Notify();
  };
}

// Long enough that nothing in these tests waits it out by accident.
constexpr absl::Duration kPatience = absl::Seconds(20);

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
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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
  test::FakeTimeSource time;
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
  test::FakeTimeSource time;
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
  const std::shared_ptr<const Model> a = test::DenseScoreModel(/*seed=*/1);
  const std::shared_ptr<const Model> b = test::DenseScoreModel(/*seed=*/2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<std::shared_ptr<const Model>> order = {a, a, b, b, b, a};
  std::vector<Outcome> outcomes(order.size());
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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

TEST(BatcherTest, ExpiredAndCancelledRequestsAreDroppedWithoutCompute) {
  Outcome blocker;
  Outcome expiring;   // 7 candidates, a deadline that passes while it waits
  Outcome cancelled;  // 5 candidates, cancelled while it waits
  Outcome kept;       // 3 candidates
  std::atomic<bool> cancel{false};
  std::atomic<bool> keep{false};
  FakeBackend backend(1);
  test::FakeTimeSource time;
  Batcher batcher(&backend, {}, &time);
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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

TEST(BatcherTest, ABackendErrorReachesEveryRequestOfTheBatch) {
  std::vector<Outcome> outcomes(3);
  Outcome blocker;
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };  // no hang on failure
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {kHold}, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRunning(1);
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
}  // namespace fuserank::engine

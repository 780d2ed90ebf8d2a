// Tests of engine/batcher (kept here, beside its only caller, until tests/engine takes it).
#include "engine/batcher.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

// Scores candidate c with item_dense[c] and returns every candidate, best first. Can hold
// each Run() until Open() so tests can fill the queue.
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
      ++runs_;
      auto open = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !gated_ || open_; };
      mu_.Await(absl::Condition(&open));
    }
    absl::Status status = fail_ ? absl::InternalError("backend broke") : absl::OkStatus();
    for (int r = 0; r < batch.num_requests() && status.ok(); ++r) {
      const uint32_t begin = batch.candidate_begin[r];
      const uint32_t end = batch.candidate_begin[r + 1];
      std::vector<ScoredIndex> items;
      for (uint32_t c = begin; c < end; ++c) items.push_back({c - begin, batch.item_dense[c]});
      std::sort(items.begin(), items.end(),
                [](const ScoredIndex& a, const ScoredIndex& b) { return a.score > b.score; });
      items.resize(batch.top_k[r]);
      result->items.insert(result->items.end(), items.begin(), items.end());
      result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    }
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
  int runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }
  int max_running() {
    absl::MutexLock lock(&mu_);
    return max_running_;
  }
  void set_fail(bool fail) { fail_ = fail; }

 private:
  const int workers_;
  const bool gated_;
  std::atomic<bool> fail_{false};
  absl::Mutex mu_;
  bool open_ = false;
  int running_ = 0;
  int max_running_ = 0;
  int runs_ = 0;
  std::set<int> busy_workers_;
};

// A one-request batch whose candidate c scores `scores[c]`.
std::unique_ptr<Batch> MakeRequest(Batcher* batcher, const std::vector<float>& scores,
                                   uint32_t top_k) {
  std::unique_ptr<Batch> batch = batcher->AcquireBatch();
  batch->candidate_begin.push_back(static_cast<uint32_t>(scores.size()));
  batch->top_k.push_back(top_k);
  batch->item_dense = scores;
  return batch;
}

constexpr auto kNoDeadline = BatcherClock::time_point::max();

struct Outcome {
  absl::Notification done;
  absl::Status status;
  std::vector<ScoredIndex> items;
  double queue_seconds = -1;
  int batch_candidates = 0;
};

RequestDone Record(Outcome* outcome) {
  return [outcome](const absl::Status& status, const RequestResult& result) {
    outcome->status = status;
    outcome->items.assign(result.items.begin(), result.items.end());
    outcome->queue_seconds = result.queue_seconds;
    outcome->batch_candidates = result.batch_candidates;
    outcome->done.Notify();
  };
}

TEST(BatcherTest, SplitsResultsBackPerRequest) {
  FakeBackend backend(3);
  Batcher batcher(&backend, {});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<Outcome> outcomes(kThreads * kPerThread);
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
    outcome.done.WaitForNotification();
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const int n = id % 5 + 1;
    ASSERT_EQ(outcome.items.size(), static_cast<size_t>(std::min(2, n))) << "request " << id;
    EXPECT_EQ(outcome.items[0].index, static_cast<uint32_t>(n - 1));
    EXPECT_EQ(outcome.items[0].score, id + 0.5f * (n - 1));
    EXPECT_GE(outcome.queue_seconds, 0.0);
    EXPECT_EQ(outcome.batch_candidates, n);
  }
}

TEST(BatcherTest, RunsOneBatchPerWorkerAtATime) {
  FakeBackend backend(3, /*gated=*/true);
  Batcher batcher(&backend, {});
  std::vector<Outcome> outcomes(6);
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)).ok());
  }
  backend.WaitRunning(3);
  EXPECT_EQ(batcher.queue_depth(), 3);
  backend.Open();
  for (Outcome& outcome : outcomes) outcome.done.WaitForNotification();
  EXPECT_EQ(backend.max_running(), 3);
  EXPECT_EQ(batcher.queue_depth(), 0);
}

TEST(BatcherTest, AFullQueueIsRefusedAtOnceNamingTheLimit) {
  FakeBackend backend(1, /*gated=*/true);
  BatcherOptions options;
  options.queue_capacity = 2;
  Batcher batcher(&backend, options);
  std::vector<Outcome> outcomes(3);
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[0])).ok());
  backend.WaitRunning(1);  // the worker holds request 0; the queue is empty again
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[1])).ok());
  ASSERT_TRUE(
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[2])).ok());
  bool called = false;
  const absl::Status full =
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline,
                     [&called](const absl::Status&, const RequestResult&) { called = true; });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("engine.queue_capacity = 2"));
  backend.Open();
  for (Outcome& outcome : outcomes) {
    outcome.done.WaitForNotification();
    EXPECT_TRUE(outcome.status.ok());
  }
  batcher.Shutdown();
  EXPECT_FALSE(called);
}

TEST(BatcherTest, ShutdownCompletesQueuedRequestsThenRefusesNewOnes) {
  FakeBackend backend(1, /*gated=*/true);
  Batcher batcher(&backend, {});
  std::vector<Outcome> outcomes(5);
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
  EXPECT_EQ(backend.runs(), 5);
  const absl::Status late =
      batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcomes[0]));
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherTest, AnExpiredRequestIsNotComputed) {
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  Outcome outcome;
  ASSERT_TRUE(batcher
                  .Submit(MakeRequest(&batcher, {1.0f}, 1),
                          BatcherClock::now() - std::chrono::milliseconds(1), Record(&outcome))
                  .ok());
  outcome.done.WaitForNotification();
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("not computed"));
  EXPECT_EQ(backend.runs(), 0);
}

TEST(BatcherTest, ABackendErrorReachesTheRequest) {
  FakeBackend backend(1);
  backend.set_fail(true);
  Batcher batcher(&backend, {});
  Outcome outcome;
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome)).ok());
  outcome.done.WaitForNotification();
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(outcome.items.empty());
}

TEST(BatcherTest, ReusesPooledBatches) {
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  std::unique_ptr<Batch> first = MakeRequest(&batcher, {1.0f, 2.0f}, 2);
  const Batch* address = first.get();
  Outcome outcome;
  ASSERT_TRUE(batcher.Submit(std::move(first), kNoDeadline, Record(&outcome)).ok());
  outcome.done.WaitForNotification();
  batcher.Shutdown();  // Complete() returns the batch to the pool after the callback
  std::unique_ptr<Batch> again = batcher.AcquireBatch();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(again->num_requests(), 0);
  EXPECT_TRUE(again->item_dense.empty());
  EXPECT_GE(again->item_dense.capacity(), 2u);
}

TEST(BatcherTest, RefusesABatchThatIsNotOneRequest) {
  FakeBackend backend(1);
  Batcher batcher(&backend, {});
  const absl::Status empty = batcher.Submit(batcher.AcquireBatch(), kNoDeadline, nullptr);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace fuserank::engine

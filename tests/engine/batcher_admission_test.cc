// Tests of the Batcher's admission on a fake backend that runs one batch per Step():
// tickets hold queue room from Admit() to Submit(), queued ids count against
// max_queued_ids, a merged batch keeps within max_batch_ids, a request that would wait
// longer than max_queue_delay_ms or its deadline is refused at the door and an over-age one
// is shed without compute, and the batch pool does not keep a large batch. Durations come
// from a fake clock the tests advance (fake_time_source_util.h): exact, with no sleep.
#include <atomic>
#include <chrono>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/batcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/fake_time_source_util.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

using test::kNoDeadline;
using test::kPatience;
using test::Outcome;
using test::Record;

struct RunRecord {
  int requests = 0;
  int candidates = 0;
  size_t ids = 0;
};

// Scores every candidate 1 (each request gets all its candidates back). Run() number n
// (from 1) returns only once Step() has been called n times, or after Open().
class StepBackend : public Backend {
 public:
  std::string device() const override { return "step"; }
  int num_workers() const override { return 1; }

  absl::Status Run(int, const Batch& batch, BatchResult* result) override {
    absl::MutexLock lock(&mu_);
    runs_.push_back({batch.num_requests(), batch.num_candidates(),
                     batch.user.rows.size() + batch.item.rows.size()});
    const size_t n = runs_.size();
    auto allowed = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_ || steps_ >= n; };
    mu_.Await(absl::Condition(&allowed));
    for (int r = 0; r < batch.num_requests(); ++r) {
      const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
      for (uint32_t c = 0; c < count; ++c) result->items.push_back({c, 1.0f});
      result->result_begin.push_back(static_cast<uint32_t>(result->items.size()));
    }
    return absl::OkStatus();
  }

  void Step() {
    absl::MutexLock lock(&mu_);
    ++steps_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits until `n` runs have started.
  void WaitRuns(size_t n) {
    absl::MutexLock lock(&mu_);
    auto started = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return runs_.size() >= n; };
    mu_.Await(absl::Condition(&started));
  }
  std::vector<RunRecord> runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  absl::Mutex mu_;
  size_t steps_ = 0;
  bool open_ = false;
  std::vector<RunRecord> runs_;
};

// One request of `candidates` candidates and `ids` item ids (OneTablePerSideModel).
std::unique_ptr<Batch> MakeRequest(Batcher* batcher, int candidates, int ids) {
  static const std::shared_ptr<const Model>* const model =
      new std::shared_ptr<const Model>(test::OneTablePerSideModel());
  std::unique_ptr<Batch> batch = batcher->AcquireBatch();
  batch->model = *model;
  batch->candidate_begin.push_back(static_cast<uint32_t>(candidates));
  batch->top_k.push_back(static_cast<uint32_t>(candidates));
  batch->user.bag_begin.push_back(0);
  for (int c = 0; c < candidates; ++c) {
    const int in_bag = c == 0 ? ids : 0;
    for (int i = 0; i < in_bag; ++i) {
      batch->item.rows.push_back(i);
      batch->item.weights.push_back(1.0f);
    }
    batch->item.bag_begin.push_back(static_cast<uint32_t>(batch->item.rows.size()));
  }
  return batch;
}

TEST(BatcherAdmissionTest, ATicketHoldsQueueRoomUntilSubmittedOrDropped) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  BatcherOptions options;
  options.queue_capacity = 2;
  Batcher batcher(&backend, options);
  absl::StatusOr<AdmissionTicket> first = batcher.Admit(kNoDeadline);
  absl::StatusOr<AdmissionTicket> second = batcher.Admit(kNoDeadline);
  ASSERT_TRUE(first.ok() && second.ok());
  // Two requests being decoded fill a queue of two, although nothing is queued yet.
  const absl::StatusOr<AdmissionTicket> third = batcher.Admit(kNoDeadline);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("engine.queue_capacity = 2"));
  Outcome unticketed;
  EXPECT_EQ(batcher.Submit(MakeRequest(&batcher, 1, 1), kNoDeadline, Record(&unticketed)).code(),
            absl::StatusCode::kResourceExhausted);
  *second = AdmissionTicket();  // dropped unused: its room comes back
  EXPECT_TRUE(batcher.Admit(kNoDeadline).ok());
  Outcome outcome;
  ASSERT_TRUE(batcher
                  .Submit(MakeRequest(&batcher, 2, 3), kNoDeadline, Record(&outcome), nullptr,
                          std::move(*first))
                  .ok());
  backend.Open();
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  batcher.Shutdown();
  EXPECT_EQ(batcher.Admit(kNoDeadline).status().code(), absl::StatusCode::kUnavailable);
}

TEST(BatcherAdmissionTest, QueuedAndAdmittedIdsCountAgainstMaxQueuedIds) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  BatcherOptions options;
  options.max_batch_ids = 10;
  options.max_queued_ids = 10;
  Batcher batcher(&backend, options);
  Outcome blocker;
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 1, 0), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRuns(1);  // the worker is held: what follows stays queued
  Outcome queued;
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 1, 6), kNoDeadline, Record(&queued)).ok());
  absl::StatusOr<AdmissionTicket> ticket = batcher.Admit(kNoDeadline);
  ASSERT_TRUE(ticket.ok());
  ASSERT_TRUE(batcher.AddIds(&*ticket, 3).ok());  // 6 queued + 3 admitted
  const absl::Status over = batcher.AddIds(&*ticket, 2);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()), HasSubstr("engine.max_queued_ids = 10"));
  EXPECT_EQ(ticket->ids(), 3);
  Outcome too_many;
  EXPECT_EQ(batcher.Submit(MakeRequest(&batcher, 1, 2), kNoDeadline, Record(&too_many)).code(),
            absl::StatusCode::kResourceExhausted);
  backend.Open();
  ASSERT_TRUE(blocker.done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(queued.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(queued.status.ok());
}

TEST(BatcherAdmissionTest, AMergedBatchKeepsWithinMaxBatchIds) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  BatcherOptions options;
  options.max_batch_ids = 10;
  options.max_batch_wait_us = 0;
  Batcher batcher(&backend, options);
  Outcome blocker;
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 1, 0), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRuns(1);
  std::vector<Outcome> outcomes(5);
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 2, 4), kNoDeadline, Record(&outcome)).ok());
  }
  backend.Open();
  for (Outcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  }
  size_t merged = 0;
  for (const RunRecord& run : backend.runs()) {
    EXPECT_LE(run.ids, 10u) << "a batch of " << run.requests << " requests";
    merged += run.requests > 1 ? 1 : 0;
  }
  EXPECT_GT(merged, 0u) << "no request was merged: the budget proved nothing";
}

// On the fake clock: B holds the worker while R0 and F queue (one request per batch); R0
// then runs for exactly 100 ms with F queued behind it, so the batch time learnt is 100 ms
// for 4 candidates. Then R1 and R2 (4 candidates each) queue, and the next batch takes F
// (or R1, where F was shed).
struct Backlog {
  std::vector<Outcome> outcomes = std::vector<Outcome>(5);  // B, R0, F, R1, R2

  void Submit(Batcher* batcher, int i) {
    ASSERT_TRUE(
        batcher->Submit(MakeRequest(batcher, 4, 1), kNoDeadline, Record(&outcomes[i])).ok());
  }
  void Build(StepBackend* backend, test::FakeTimeSource* time, Batcher* batcher) {
    Submit(batcher, 0);
    backend->WaitRuns(1);
    Submit(batcher, 1);
    Submit(batcher, 2);
    backend->Step();  // B ends; R0 runs, F behind it
    backend->WaitRuns(2);
    time->Advance(std::chrono::milliseconds(100));
    Submit(batcher, 3);
    Submit(batcher, 4);
    backend->Step();  // R0 ends; the next batch takes one request
    backend->WaitRuns(3);
  }
};

BatcherOptions OneRequestPerBatch(int max_queue_delay_ms) {
  BatcherOptions options;
  options.max_batch_candidates = 4;
  options.max_batch_wait_us = 0;
  options.max_queue_delay_ms = max_queue_delay_ms;
  return options;
}

TEST(BatcherAdmissionTest, AStandingQueueIsRefusedAtTheDoorAndItsOldRequestsShed) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  test::FakeTimeSource time;
  Batcher batcher(&backend, OneRequestPerBatch(60), &time);
  Backlog backlog;
  backlog.Build(&backend, &time, &batcher);
  if (HasFatalFailure()) return;
  // F waited 100 ms, more than 60: shed when R1's batch formed. R2 waits behind R1: a new
  // request would wait as long as R0's batch of as many candidates took, 100 ms.
  std::vector<Outcome>& outcomes = backlog.outcomes;
  ASSERT_TRUE(outcomes[2].done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(outcomes[2].status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(outcomes[2].status.message()),
      HasSubstr("shed after 100 ms in the queue, more than engine.max_queue_delay_ms (60)"));
  const absl::StatusOr<AdmissionTicket> refused = batcher.Admit(kNoDeadline, 4);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("would wait about 100 ms (4 candidates ahead, full batches at about 40 "
                        "per second), more than engine.max_queue_delay_ms (60)"));
  time.Advance(std::chrono::milliseconds(60));
  EXPECT_FALSE(outcomes[4].done.HasBeenNotified());
  time.Advance(std::chrono::milliseconds(1));
  backend.Step();  // R2 has now waited 61 ms, longer than 60: shed, not run
  ASSERT_TRUE(outcomes[4].done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(outcomes[4].status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(outcomes[4].status.message()), HasSubstr("shed after 61 ms"));
  for (int i : {0, 1, 3}) {
    ASSERT_TRUE(outcomes[i].done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcomes[i].status.ok()) << outcomes[i].status;
  }
  EXPECT_EQ(backend.runs().size(), 3u);
  EXPECT_TRUE(batcher.Admit(kNoDeadline, 4).ok()) << "the queue is empty again";
}

TEST(BatcherAdmissionTest, ARequestWaitingExactlyMaxQueueDelayIsStillRun) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  test::FakeTimeSource time;
  Batcher batcher(&backend, OneRequestPerBatch(60), &time);
  Outcome blocker;
  Outcome waiting;
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 4, 1), kNoDeadline, Record(&blocker)).ok());
  backend.WaitRuns(1);
  ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 4, 1), kNoDeadline, Record(&waiting)).ok());
  time.Advance(std::chrono::milliseconds(60));  // not more than the limit
  backend.Open();
  ASSERT_TRUE(waiting.done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(waiting.status.ok()) << waiting.status;
  EXPECT_EQ(backend.runs().size(), 2u);
}

TEST(BatcherAdmissionTest, ADeadlineShorterThanThePredictedWaitIsRefusedAtTheDoor) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  test::FakeTimeSource time;
  Batcher batcher(&backend, OneRequestPerBatch(0), &time);  // no age limit: deadlines alone
  Backlog backlog;
  backlog.Build(&backend, &time, &batcher);
  if (HasFatalFailure()) return;
  // F runs (no age limit); R1 and R2 wait: 8 candidates ahead at the 100 ms learnt for a
  // batch of 4. A deadline 199 ms away is refused, one 200 ms away is not.
  const absl::StatusOr<AdmissionTicket> hurried =
      batcher.Admit(time.Now() + std::chrono::milliseconds(199), 4);
  EXPECT_EQ(hurried.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(hurried.status().message()),
              HasSubstr("the request's deadline is 199 ms away, but it would wait about 200 ms "
                        "in the queue: it was not computed"));
  EXPECT_TRUE(batcher.Admit(time.Now() + std::chrono::milliseconds(200), 4).ok());
  backend.Open();
  for (Outcome& outcome : backlog.outcomes) {  // no age limit: all run
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  }
}

// Every batch teaches the wait, with a queue behind it or not: a wait learnt too long keeps
// the queue too short for a backlog, so were only backlogged batches counted, the door
// would go on refusing after the workers were fast again.
TEST(BatcherAdmissionTest, BatchesWithoutABacklogTeachTheWaitToo) {
  StepBackend backend;
  absl::Cleanup open_on_exit = [&backend] { backend.Open(); };
  test::FakeTimeSource time;
  Batcher batcher(&backend, OneRequestPerBatch(60), &time);
  size_t runs = 0;
  // One request alone at a time, each running `ms` on the fake clock.
  auto run_alone = [&](int ms) {
    Outcome outcome;
    ASSERT_TRUE(batcher.Submit(MakeRequest(&batcher, 4, 1), kNoDeadline, Record(&outcome)).ok());
    backend.WaitRuns(++runs);
    time.Advance(std::chrono::milliseconds(ms));
    backend.Step();
    ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
  };
  // Whether a request of 4 candidates is admitted behind a running one and a queued one.
  auto admitted_behind_one = [&]() -> bool {
    Outcome running, queued;
    EXPECT_TRUE(batcher.Submit(MakeRequest(&batcher, 4, 1), kNoDeadline, Record(&running)).ok());
    backend.WaitRuns(++runs);
    EXPECT_TRUE(batcher.Submit(MakeRequest(&batcher, 4, 1), kNoDeadline, Record(&queued)).ok());
    const bool admitted = batcher.Admit(kNoDeadline, 4).ok();
    backend.Step();  // both end at once on the fake clock (0 s: not noted)
    ++runs;
    backend.Step();
    EXPECT_TRUE(running.done.WaitForNotificationWithTimeout(kPatience));
    EXPECT_TRUE(queued.done.WaitForNotificationWithTimeout(kPatience));
    return admitted;
  };
  run_alone(100);  // no backlog: still learnt as 100 ms a batch
  if (HasFatalFailure()) return;
  EXPECT_FALSE(admitted_behind_one()) << "a batch run alone taught nothing";
  for (int i = 0; i < 40; ++i) {
    run_alone(1);  // fast again, never a backlog
    if (HasFatalFailure()) return;
  }
  EXPECT_TRUE(admitted_behind_one()) << "the door still refuses after 40 fast batches";
}

TEST(BatcherAdmissionTest, ThePoolDoesNotKeepALargeBatch) {
  StepBackend backend;
  Batcher batcher(&backend, {});
  std::unique_ptr<Batch> large = batcher.AcquireBatch();
  large->item.rows.resize(1 << 20);  // 4 MiB of rows
  large->item.weights.resize(1 << 20);
  batcher.ReleaseBatch(std::move(large));
  std::unique_ptr<Batch> again = batcher.AcquireBatch();
  EXPECT_LT(again->capacity_bytes(), size_t{1} << 20) << "the large batch was pooled";
  std::unique_ptr<Batch> small = std::move(again);
  small->item.rows.resize(100);
  const Batch* address = small.get();
  batcher.ReleaseBatch(std::move(small));
  EXPECT_EQ(batcher.AcquireBatch().get(), address) << "a small batch is still pooled";
  backend.Open();
}

}  // namespace
}  // namespace fuserank::engine

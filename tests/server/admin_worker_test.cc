// AdminWorker: tasks run one at a time in arrival order on its one thread; a full queue is
// RESOURCE_EXHAUSTED at once; Stop() finishes the task in progress and drops the queued ones
// (each told), after which Post is UNAVAILABLE; Close() drops them at once while the task in
// progress goes on. With no room to wait, a task posted while one runs is refused at once,
// naming the one in progress. A task no longer wanted when its turn comes is dropped, told
// why, and never run.
#include "server/admin_worker.h"

#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A task's work that answers nothing.
template <typename F>
std::function<AdminWorker::Answer()> Work(F work) {
  return [work]() mutable -> AdminWorker::Answer {
    work();
    return nullptr;
  };
}

TEST(AdminWorkerTest, RunsTasksInOrderOnOneThread) {
  AdminWorker worker(4, "hot-set changes");
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  absl::Notification done;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(worker
                    .Post({Work([&, i] {
                             absl::MutexLock lock(&mu);
                             order.push_back(i);
                             threads.push_back(std::this_thread::get_id());
                             if (i == 2) done.Notify();
                           }),
                           nullptr, ""})
                    .ok());
  }
  done.WaitForNotification();
  absl::MutexLock lock(&mu);
  EXPECT_THAT(order, ElementsAre(0, 1, 2));
  EXPECT_EQ(threads[0], threads[1]);
  EXPECT_EQ(threads[1], threads[2]);
  EXPECT_NE(threads[0], std::this_thread::get_id());
}

TEST(AdminWorkerTest, AFullQueueIsRefusedAtOnceAndStopDropsTheQueuedTasks) {
  AdminWorker worker(2, "hot-set changes");
  absl::Notification started, release;
  int ran = 0, dropped = 0;
  ASSERT_TRUE(worker
                  .Post({Work([&] {
                           started.Notify();
                           release.WaitForNotification();
                           ++ran;
                         }),
                         [&](const absl::Status&) { ++dropped; }, ""})
                  .ok());
  started.WaitForNotification();  // the worker is busy; the queue is empty
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(
        worker.Post({Work([&] { ++ran; }), [&](const absl::Status&) { ++dropped; }, ""}).ok());
  }
  const absl::Status busy =
      worker.Post({Work([&] { ++ran; }), [&](const absl::Status&) { ++dropped; }, ""});
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(busy.message(), HasSubstr("the admin service is busy: 2 calls are already waiting"));
  std::thread stopper([&] { worker.Stop(); });
  // Stop has closed the worker (and dropped the queue) once a post is UNAVAILABLE; until
  // then the queue is full and a post is refused without being queued. Stop then waits for
  // the task in progress.
  while (worker.Post({Work([] {}), nullptr, ""}).code() != absl::StatusCode::kUnavailable) {
    std::this_thread::yield();
  }
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(dropped, 2);  // the refused task is neither run nor dropped
  EXPECT_EQ(worker.Post({Work([&] { ++ran; }), nullptr, ""}).code(),
            absl::StatusCode::kUnavailable);
  worker.Stop();  // idempotent
}

TEST(AdminWorkerTest, WithNoRoomToWaitATaskPostedWhileOneRunsIsRefusedNamingIt) {
  AdminWorker worker(0, "reloads");
  absl::Notification started, release, second_ran;
  ASSERT_TRUE(worker
                  .Post({Work([&] {
                           started.Notify();
                           release.WaitForNotification();
                         }),
                         nullptr, "a reload of model 'big'"})
                  .ok());
  started.WaitForNotification();
  const absl::Status busy = worker.Post({Work([] {}), nullptr, "a reload of model 'small'"});
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(busy.message(), HasSubstr("a reload of model 'big' is in progress (for "));
  EXPECT_THAT(busy.message(), HasSubstr("reloads run one at a time"));
  release.Notify();
  // Once the first has finished, the next one runs.
  absl::Status posted;
  do {
    posted =
        worker.Post({Work([&] { second_ran.Notify(); }), nullptr, "a reload of model 'small'"});
  } while (absl::IsResourceExhausted(posted));
  ASSERT_TRUE(posted.ok()) << posted;
  second_ran.WaitForNotification();
}

// A task's answer runs once the worker is free: a client that posts again as soon as it
// has its answer is never refused as busy.
TEST(AdminWorkerTest, ATaskIsAnsweredOnlyOnceTheWorkerIsFreeForTheNext) {
  AdminWorker worker(0, "reloads");
  absl::Notification answered, next_ran;
  absl::Status next;
  ASSERT_TRUE(worker
                  .Post({[&]() -> AdminWorker::Answer {
                           return [&] {
                             next = worker.Post({Work([&] { next_ran.Notify(); }), nullptr, "b"});
                             answered.Notify();
                           };
                         },
                         nullptr, "a"})
                  .ok());
  answered.WaitForNotification();
  EXPECT_TRUE(next.ok()) << next;
  next_ran.WaitForNotification();
}

// A task that waited while its client went (cancelled, deadline passed) changes nothing:
// its run is skipped and its drop gets what `wanted` said; the next wanted task runs.
TEST(AdminWorkerTest, ATaskNoLongerWantedWhenItsTurnComesIsDroppedNotRun) {
  AdminWorker worker(4, "hot-set changes");
  absl::Notification started, release, last_ran;
  ASSERT_TRUE(worker
                  .Post({Work([&] {
                           started.Notify();
                           release.WaitForNotification();
                         }),
                         nullptr, "first"})
                  .ok());
  started.WaitForNotification();
  bool gone = false;  // set while the task waits; read on the worker after `release`
  bool ran = false;
  absl::Status why;
  ASSERT_TRUE(
      worker
          .Post({Work([&] { ran = true; }), [&](const absl::Status& s) { why = s; }, "second",
                 [&] { return gone ? absl::CancelledError("the client went") : absl::OkStatus(); }})
          .ok());
  ASSERT_TRUE(worker.Post({Work([&] { last_ran.Notify(); }), nullptr, "third"}).ok());
  gone = true;
  release.Notify();
  last_ran.WaitForNotification();
  EXPECT_FALSE(ran);
  EXPECT_EQ(why.code(), absl::StatusCode::kCancelled) << why;
  EXPECT_THAT(why.message(), HasSubstr("the client went"));
}

// At the start of a shutdown: the waiting tasks are answered UNAVAILABLE before Close()
// returns and new ones are refused, while the task in progress goes on to its end.
TEST(AdminWorkerTest, CloseDropsTheWaitingTasksAtOnceWhileTheOneInProgressGoesOn) {
  AdminWorker worker(4, "hot-set changes");
  absl::Notification started, release;
  bool first_done = false;
  ASSERT_TRUE(worker
                  .Post({Work([&] {
                           started.Notify();
                           release.WaitForNotification();
                           first_done = true;
                         }),
                         nullptr, "first"})
                  .ok());
  started.WaitForNotification();
  std::vector<absl::Status> dropped;
  bool queued_ran = false;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(worker
                    .Post({Work([&] { queued_ran = true; }),
                           [&](const absl::Status& s) { dropped.push_back(s); }, "queued"})
                    .ok());
  }
  worker.Close();  // the first task still holds the worker
  ASSERT_EQ(dropped.size(), 2u);
  for (const absl::Status& s : dropped) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("shutting down"));
  }
  EXPECT_EQ(worker.Post({Work([] {}), nullptr, "late"}).code(), absl::StatusCode::kUnavailable);
  release.Notify();
  worker.Stop();
  EXPECT_TRUE(first_done);
  EXPECT_FALSE(queued_ran);
}

}  // namespace
}  // namespace fuserank::server

// AdminWorker: tasks run one at a time in arrival order on its one thread; a full queue is
// RESOURCE_EXHAUSTED at once; Stop() finishes the task in progress and drops the queued ones
// (each told), after which Post is UNAVAILABLE. With no room to wait, a task posted while
// one runs is refused at once, naming the one in progress.
#include "server/admin_worker.h"

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

TEST(AdminWorkerTest, RunsTasksInOrderOnOneThread) {
  AdminWorker worker(4, "hot-set changes");
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  absl::Notification done;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(worker
                    .Post({[&, i] {
                             absl::MutexLock lock(&mu);
                             order.push_back(i);
                             threads.push_back(std::this_thread::get_id());
                             if (i == 2) done.Notify();
                           },
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
                  .Post({[&] {
                           started.Notify();
                           release.WaitForNotification();
                           ++ran;
                         },
                         [&] { ++dropped; }, ""})
                  .ok());
  started.WaitForNotification();  // the worker is busy; the queue is empty
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(worker.Post({[&] { ++ran; }, [&] { ++dropped; }, ""}).ok());
  }
  const absl::Status busy = worker.Post({[&] { ++ran; }, [&] { ++dropped; }, ""});
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(busy.message(), HasSubstr("the admin service is busy: 2 calls are already waiting"));
  std::thread stopper([&] { worker.Stop(); });
  absl::SleepFor(absl::Milliseconds(20));  // Stop waits for the task in progress
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(dropped, 2);  // the refused task is neither run nor dropped
  EXPECT_EQ(worker.Post({[&] { ++ran; }, nullptr, ""}).code(), absl::StatusCode::kUnavailable);
  worker.Stop();  // idempotent
}

TEST(AdminWorkerTest, WithNoRoomToWaitATaskPostedWhileOneRunsIsRefusedNamingIt) {
  AdminWorker worker(0, "reloads");
  absl::Notification started, release, second_ran;
  ASSERT_TRUE(worker
                  .Post({[&] {
                           started.Notify();
                           release.WaitForNotification();
                         },
                         nullptr, "a reload of model 'big'"})
                  .ok());
  started.WaitForNotification();
  const absl::Status busy = worker.Post({[] {}, nullptr, "a reload of model 'small'"});
  EXPECT_EQ(busy.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(busy.message(), HasSubstr("a reload of model 'big' is in progress (for "));
  EXPECT_THAT(busy.message(), HasSubstr("reloads run one at a time"));
  release.Notify();
  // Once the first has finished, the next one runs.
  absl::Status posted;
  do {
    posted = worker.Post({[&] { second_ran.Notify(); }, nullptr, "a reload of model 'small'"});
  } while (absl::IsResourceExhausted(posted));
  ASSERT_TRUE(posted.ok()) << posted;
  second_ran.WaitForNotification();
}

}  // namespace
}  // namespace fuserank::server

// engine.worker_nice: the batch workers and the CPU engine's helper threads run the
// configured number of nice steps below the thread that started them.
#include "engine/thread_priority.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/batcher.h"
#include "engine/cpu/cpu_thread_pool.h"
#include "gtest/gtest.h"
#include "tests/engine/batcher_test_util.h"
#include "tests/engine/fake_backend_util.h"

namespace fuserank::engine {
namespace {

using test::FakeBackend;
using test::kNoDeadline;
using test::kPatience;
using test::Outcome;
using test::Record;

// Runs fn on a new thread (so the test's own thread keeps its priority) and joins it.
template <typename Fn>
void OnNewThread(Fn fn) {
  std::thread thread(fn);
  thread.join();
}

TEST(ThreadPriorityTest, LowersTheCallingThreadOnly) {
  const int base = CurrentThreadNice();
  if (base > 19 - 3) GTEST_SKIP() << "the test runs at nice " << base << ": no room to lower it";
  OnNewThread([base] {
    ASSERT_TRUE(LowerCurrentThreadPriority(3).ok());
    EXPECT_EQ(CurrentThreadNice(), base + 3);
    ASSERT_TRUE(LowerCurrentThreadPriority(0).ok());
    EXPECT_EQ(CurrentThreadNice(), base + 3) << "0 steps change nothing";
    ASSERT_TRUE(LowerCurrentThreadPriority(19).ok());
    EXPECT_EQ(CurrentThreadNice(), 19) << "capped at the lowest priority";
  });
  EXPECT_EQ(CurrentThreadNice(), base) << "another thread's nice value changed this one's";
}

TEST(ThreadPriorityTest, BatcherWorkersRunWorkerNiceStepsBelowTheirCreator) {
  const int base = CurrentThreadNice();
  if (base > 19 - 7) GTEST_SKIP() << "the test runs at nice " << base << ": no room to lower it";
  for (const int steps : {0, 7}) {
    FakeBackend backend(2);
    BatcherOptions options;
    options.worker_nice = steps;
    Batcher batcher(&backend, options);
    std::vector<Outcome> outcomes(4);
    for (Outcome& outcome : outcomes) {
      ASSERT_TRUE(
          batcher.Submit(test::MakeRequest(&batcher, {1.0f}, 1), kNoDeadline, Record(&outcome))
              .ok());
    }
    for (Outcome& outcome : outcomes) {
      ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kPatience));
      ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    }
    const std::vector<test::RunRecord> runs = backend.runs();
    ASSERT_FALSE(runs.empty());
    for (const test::RunRecord& run : runs) {
      EXPECT_EQ(run.nice, base + steps) << "worker_nice " << steps;
    }
  }
  EXPECT_EQ(CurrentThreadNice(), base);
}

TEST(ThreadPriorityTest, CpuHelperThreadsRunNiceStepsBelowTheirCreator) {
  const int base = CurrentThreadNice();
  if (base > 19 - 5) GTEST_SKIP() << "the test runs at nice " << base << ": no room to lower it";
  CpuThreadPool pool(3, 5);
  std::mutex mu;
  std::vector<int> nice_of_thread(3, -100);
  // Enough iterations, each slow enough, that every helper takes some.
  pool.ParallelFor(3000, [&](int thread, int) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    std::lock_guard<std::mutex> lock(mu);
    nice_of_thread[thread] = CurrentThreadNice();
  });
  EXPECT_EQ(nice_of_thread[0], base) << "the caller keeps its own priority";
  for (int t = 1; t < 3; ++t) {
    if (nice_of_thread[t] == -100) continue;  // took no iteration: nothing to check
    EXPECT_EQ(nice_of_thread[t], base + 5) << "helper " << t;
  }
  EXPECT_TRUE(nice_of_thread[1] != -100 || nice_of_thread[2] != -100)
      << "no helper took an iteration in 3000";
}

}  // namespace
}  // namespace fuserank::engine

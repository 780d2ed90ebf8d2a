// The fake backend of the Batcher tests (batcher_test.cc, batcher_queue_test.cc,
// batcher_failure_test.cc): it scores each candidate with its item_dense value, can hold a
// Run() until the test opens it, and records what every Run() saw; and the one-request
// batches these tests submit. The backend is thread-safe (the Batcher's workers call it).
#ifndef FUSERANK_TESTS_ENGINE_FAKE_BACKEND_UTIL_H_
#define FUSERANK_TESTS_ENGINE_FAKE_BACKEND_UTIL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/batcher.h"
#include "engine/model.h"
#include "tests/engine/batcher_test_util.h"

namespace fuserank::engine::test {

// A candidate scoring this holds its batch's Run() until Open().
inline constexpr float kHold = -1.0f;

// What one Run() saw.
struct RunRecord {
  int requests = 0;
  int candidates = 0;
  const Model* model = nullptr;
  int nice = 0;                       // the worker thread's nice value (engine/thread_priority.h)
  BatcherClock::time_point deadline;  // Batch::deadline
};

// Scores candidate c with item_dense[c] and returns every candidate of a request, best
// first (its top_k of them). Holds a Run() until Open() when built gated, or when the
// batch's first candidate scores kHold. Records every Run().
class FakeBackend : public Backend {
 public:
  explicit FakeBackend(int workers, bool gated = false) : workers_(workers), gated_(gated) {}

  std::string device() const override { return "fake"; }
  int num_workers() const override { return workers_; }

  absl::Status Run(int worker, const Batch& batch, BatchResult* result) override;

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

// What the requests of these tests are for, unless a test names another model
// (DenseScoreModel()).
const std::shared_ptr<const Model>& DefaultModel();

// A one-request batch whose candidate c scores `scores[c]`, for `model` (null: the default).
std::unique_ptr<Batch> MakeRequest(Batcher* batcher, const std::vector<float>& scores,
                                   uint32_t top_k, std::shared_ptr<const Model> model = nullptr);

// A request of `candidates` candidates that all score 1, top_k 1.
std::unique_ptr<Batch> MakeRequest(Batcher* batcher, int candidates);

// Submits a request that scores kHold (reported to `blocker`) and waits until its Run()
// holds a worker of `backend`: with one worker, what comes next queues until Open().
// Fatal failures are the caller's to check (ASSERT_NO_FATAL_FAILURE).
void HoldTheWorker(Batcher& batcher, FakeBackend& backend, Outcome* blocker);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_FAKE_BACKEND_UTIL_H_

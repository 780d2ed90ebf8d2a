// The request path between decode and compute: decoded requests wait in a bounded queue,
// one batcher thread forms them into batches, and one thread per backend worker runs each
// batch and hands every request its own slice of the result. Batch objects are pooled, so
// a warm server allocates no Batch per request.
// Thread-safe: AcquireBatch/ReleaseBatch/Submit/Shutdown may be called from any thread.
#ifndef FUSERANK_ENGINE_BATCHER_H_
#define FUSERANK_ENGINE_BATCHER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/batch.h"

namespace fuserank::engine {

using BatcherClock = std::chrono::steady_clock;

// What one request gets back. `items` points into the worker's result buffer and is valid
// only during the callback.
struct RequestResult {
  absl::Span<const ScoredIndex> items;  // its top-K, best first
  StageTimes stages;                    // of the whole batch it ran in
  double queue_seconds = 0;             // Submit() -> the start of its batch's Run()
  int batch_candidates = 0;             // candidates of the batch it ran in
  int position = 0;                     // the request's position in that batch (0: first)
};

// Called exactly once per accepted request, on a batcher or worker thread. It must not
// block for long: the thread serves other requests next.
using RequestDone = absl::AnyInvocable<void(const absl::Status&, const RequestResult&)>;

struct BatcherOptions {
  int queue_capacity = 1024;        // engine.queue_capacity: requests waiting
  int max_batch_candidates = 8192;  // engine.max_batch_candidates
  int max_batch_wait_us = 200;      // engine.max_batch_wait_us
};

class Batcher {
 public:
  // `backend` must outlive the Batcher. Starts 1 + backend->num_workers() threads.
  Batcher(Backend* backend, BatcherOptions options);
  ~Batcher();  // Shutdown()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // A cleared Batch from the pool (a new one only when the pool is empty).
  std::unique_ptr<Batch> AcquireBatch();
  // Gives back a batch that will not be submitted (its decode failed, say).
  void ReleaseBatch(std::unique_ptr<Batch> batch);

  // Queues `request` (a Batch holding exactly one request). OK: `done` will be called
  // exactly once. Otherwise `done` is never called and the batch goes back to the pool:
  // RESOURCE_EXHAUSTED at once when engine.queue_capacity requests are already waiting,
  // UNAVAILABLE after Shutdown(). A request whose `deadline` has passed when its batch
  // forms completes with DEADLINE_EXCEEDED without being computed.
  absl::Status Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                      RequestDone done);

  // Stops accepting, completes every queued request, joins the threads. Idempotent.
  void Shutdown();

  int queue_depth() const { return queue_depth_.load(std::memory_order_relaxed); }

 private:
  struct Work {
    std::unique_ptr<Batch> batch;
    RequestDone done;
    BatcherClock::time_point enqueued;
    BatcherClock::time_point deadline;
  };
  // A batch ready to run: the requests it holds (in order) and the merged Batch.
  struct Formed {
    std::vector<Work> parts;
    std::unique_ptr<Batch> merged;  // null: the batch of parts[0] alone
  };

  void BatcherLoop();
  void WorkerLoop(int worker);
  // Takes the next requests off the queue into `formed` (drops expired ones).
  // REQUIRES: mu_ held, queue not empty.
  void FormBatch(Formed* formed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunBatch(int worker, Formed* formed, BatchResult* result);
  void Complete(Work* work, const absl::Status& status, const RequestResult& result);

  Backend* const backend_;
  const BatcherOptions options_;

  absl::Mutex mu_;
  // Ring buffer of queued requests: no allocation per Submit.
  std::vector<Work> queue_ ABSL_GUARDED_BY(mu_);
  size_t queue_head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queue_size_ ABSL_GUARDED_BY(mu_) = 0;
  // One slot per worker. The batcher fills the slot of an idle worker and sets
  // `assigned`; from then until the worker clears `assigned`, the worker alone touches
  // `formed` (outside mu_). Reused, so forming a batch allocates nothing once warm.
  struct Slot {
    Formed formed;
    bool assigned = false;
  };
  std::vector<Slot> slots_;
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);  // workers without a batch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool batcher_done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> queue_depth_{0};

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<Batch>> pool_ ABSL_GUARDED_BY(pool_mu_);
  size_t pool_limit_ = 0;

  std::vector<std::thread> threads_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown() callers
  bool joined_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCHER_H_

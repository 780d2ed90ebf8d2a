// The request path between decode and compute: decoded requests wait in a bounded queue,
// one batcher thread merges them into batches (dynamic batching), and one thread per
// backend worker runs each batch and hands every request its own slice of the result.
// Request Batches are pooled and each worker merges into its own reused Batch, so a warm
// Batcher allocates nothing per request.
// Thread-safe: every public method may be called from any thread.
//
// When a batch forms (the policy; docs/serving.md explains the choice):
//   - only when a backend worker is free: queued requests wait in the queue, where later
//     arrivals can still join them, never in a half-formed batch;
//   - a batch is the longest run of queued requests, oldest first, of one model whose
//     candidates fit in max_batch_candidates (a request is never split; one larger than
//     the limit runs alone);
//   - it goes at once when it is full, when another worker is free as well, or when no
//     worker is busy (low load: waiting could only add latency); otherwise -- the last
//     free worker while the others compute -- it waits until its oldest request has been
//     queued max_batch_wait_us, gathering the requests that would otherwise wait for a
//     whole batch to finish;
//   - a request whose deadline has passed or whose caller cancelled it is dropped when its
//     batch forms, with DEADLINE_EXCEEDED or CANCELLED, and is never computed.
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
  uint32_t graph_capture_failures = 0;  // of the whole batch (BatchResult)
  double queue_seconds = 0;             // Submit() -> the start of its batch's Run()
  int batch_candidates = 0;             // candidates of the batch it ran in
  int batch_requests = 0;               // requests of the batch it ran in
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

  // A cheap early answer to "would Submit() take a request now?", so that a caller can
  // refuse before decoding: RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after
  // Shutdown(), else OK. Submit() alone decides.
  absl::Status Admission() const;

  // Queues `request` (a Batch holding exactly one request). OK: `done` will be called
  // exactly once. Otherwise `done` is never called and the batch goes back to the pool:
  // RESOURCE_EXHAUSTED at once when engine.queue_capacity requests are already waiting,
  // UNAVAILABLE after Shutdown(). A request whose `deadline` has passed when its batch
  // forms completes with DEADLINE_EXCEEDED without being computed; one whose `cancelled`
  // flag (optional; it must stay valid until `done` runs) is set by then completes with
  // CANCELLED, also without being computed.
  absl::Status Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                      RequestDone done, const std::atomic<bool>* cancelled = nullptr);

  // Stops accepting, completes every queued request, joins the threads. Idempotent.
  // REQUIRES: not called from a RequestDone callback (it would join its own thread).
  void Shutdown();

  int queue_depth() const { return queue_depth_.load(std::memory_order_relaxed); }
  int queue_capacity() const { return static_cast<int>(capacity_); }

 private:
  struct Work {
    std::unique_ptr<Batch> batch;
    RequestDone done;
    const std::atomic<bool>* cancelled = nullptr;
    BatcherClock::time_point enqueued;
    BatcherClock::time_point deadline;
    int candidates = 0;
  };
  // One slot per worker. The batcher fills the slot of an idle worker and sets
  // `assigned`; from then until the worker clears `assigned`, the worker alone touches
  // `parts` and `merged` (outside mu_). Both are reused: no allocation once warm.
  struct Slot {
    std::vector<Work> parts;  // the requests of the batch, in queue order
    Batch merged;             // their Append()ed copy when there are several
    bool assigned = false;
  };

  void BatcherLoop();
  void WorkerLoop(int worker);
  // True when a batch could form (a request queued, a worker free) or, when stopping with
  // nothing queued, the batcher should exit.
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the batcher should act now: HasWork() and, unless stopping, the policy of
  // the header comment says go.
  bool ReadyToForm() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops the next batch's requests into `slot` and the dropped ones into dropped_.
  // REQUIRES: queue not empty.
  void FormBatch(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Work PopHead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteDropped();
  void RunBatch(int worker, Slot* slot, BatchResult* result);
  void Complete(Work* work, const absl::Status& status, const RequestResult& result);

  Backend* const backend_;
  const BatcherOptions options_;
  const int workers_;
  const size_t capacity_;
  const BatcherClock::duration max_wait_;

  mutable absl::Mutex mu_;
  // Ring buffer of queued requests: no allocation per Submit. Sized once.
  std::vector<Work> queue_ ABSL_GUARDED_BY(mu_);
  size_t queue_head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queue_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_candidates_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Slot> slots_;                     // sized once
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);  // workers without a batch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool batcher_done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> queue_depth_{0};
  std::atomic<bool> refusing_{false};  // mirrors stopping_ for Admission()
  std::vector<Work> dropped_;          // batcher thread only: expired or cancelled

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<Batch>> pool_ ABSL_GUARDED_BY(pool_mu_);
  size_t pool_limit_ = 0;

  std::vector<std::thread> threads_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown() callers
  bool joined_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCHER_H_

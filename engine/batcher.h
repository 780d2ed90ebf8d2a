// The request path between decode and compute: decoded requests wait in a bounded queue,
// one batcher thread merges them into batches (dynamic batching), and one thread per
// backend worker runs each batch and hands every request its own slice of the result.
// Request Batches are pooled (up to a byte budget, so the pool never keeps the largest
// batch it has seen) and each worker merges into its own reused Batch, so a warm Batcher
// allocates nothing per request.
// Thread-safe: every public method may be called from any thread.
//
// Admission (docs/serving.md, "Admission"): Admit() answers before the caller decodes, and
// counts the requests it admitted as queued until they are submitted, so decoding callers
// cannot overfill the queue. It refuses, with RESOURCE_EXHAUSTED at once, when the queue
// holds queue_capacity requests or max_queued_ids ids, and when a new request would wait
// longer than max_queue_delay_ms, and with DEADLINE_EXCEEDED when it would wait longer
// than its deadline leaves: the wait is predicted from
// the candidates queued ahead of it and a per-batch plus per-candidate time fitted to the
// batches workers ran, timed on the Batcher's clock from pick to done (batch_time_model.h).
// Before the first batch has run, nothing is predicted.
//
// When a batch forms (the policy; docs/serving.md explains the choice):
//   - only when a backend worker is free: queued requests wait in the queue, where later
//     arrivals can still join them, never in a half-formed batch;
//   - a batch is the longest run of queued requests, oldest first, of one model whose
//     candidates fit in max_batch_candidates and whose ids fit in max_batch_ids (a request
//     is never split; one larger than the candidate limit runs alone);
//   - it goes at once when it is full, when another worker is free as well, or when no
//     worker is busy (low load: waiting could only add latency); otherwise -- the last
//     free worker while the others compute -- it waits until its oldest request has been
//     queued max_batch_wait_us, gathering the requests that would otherwise wait for a
//     whole batch to finish;
//   - a request whose deadline has passed or whose caller cancelled it is dropped when its
//     batch forms, with DEADLINE_EXCEEDED or CANCELLED, and one that has waited longer than
//     max_queue_delay_ms is shed with RESOURCE_EXHAUSTED; none of them is computed.
#ifndef FUSERANK_ENGINE_BATCHER_H_
#define FUSERANK_ENGINE_BATCHER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/batch_time_model.h"
#include "engine/config_defaults.h"
#include "engine/object_pool.h"
#include "engine/time_source.h"

namespace fuserank::engine {

// The clock of deadlines and queue times; a Batcher reads it through a TimeSource.
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
  // The engine.* keys of the same names.
  int queue_capacity = defaults::kQueueCapacity;  // requests waiting
  int max_batch_candidates = defaults::kMaxBatchCandidates;
  int max_batch_wait_us = defaults::kMaxBatchWaitUs;
  int64_t max_batch_ids = defaults::kMaxBatchIds;       // user + item ids per batch
  int64_t max_queued_ids = defaults::kMaxQueuedIds;     // ids queued or admitted
  int max_queue_delay_ms = defaults::kMaxQueueDelayMs;  // 0: no age limit
  // Workers' nice steps below the creator's (0..19; engine/thread_priority.h). 0 here: the
  // engine alone leaves priorities as they are; the server passes engine.worker_nice.
  int worker_nice = 0;
};

class Batcher;

// Room held in a Batcher's queue for one request from Admit() to Submit(), counted as
// queued so that requests being decoded cannot overfill the queue. Destroying a ticket
// that was not submitted gives the room back. Move-only; used by one thread at a time.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  ~AdmissionTicket() { Release(); }

  bool valid() const { return batcher_ != nullptr; }
  int64_t ids() const { return ids_; }

 private:
  friend class Batcher;
  void Release();

  Batcher* batcher_ = nullptr;
  int candidates_ = 0;
  int64_t ids_ = 0;
};

class Batcher {
 public:
  // `backend` and `time` must outlive the Batcher. Starts 1 + backend->num_workers()
  // threads. Every time the Batcher reads (queue times, max_batch_wait_us,
  // max_queue_delay_ms, deadlines, the batch times it learns) and every wait of its
  // batcher thread goes through `time`: the steady clock unless a test injects another.
  Batcher(Backend* backend, BatcherOptions options, const TimeSource* time = SteadyTimeSource());
  ~Batcher();  // Shutdown()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // A cleared Batch from the pool (a new one only when the pool is empty).
  std::unique_ptr<Batch> AcquireBatch();
  // Gives back a batch that will not be submitted (its decode failed, say).
  void ReleaseBatch(std::unique_ptr<Batch> batch);

  // Admission before decoding (see the header comment): a ticket holding one request's
  // room, or RESOURCE_EXHAUSTED (DEADLINE_EXCEEDED for a predicted deadline miss) at once
  // with a message naming the limit, or UNAVAILABLE
  // after Shutdown(). `deadline` is the request's (time_point::max() for none), `candidates`
  // its candidate count (held as queued work until it is submitted).
  absl::StatusOr<AdmissionTicket> Admit(BatcherClock::time_point deadline, int candidates = 0);
  // Counts `ids` more ids against max_queued_ids for `ticket`; RESOURCE_EXHAUSTED naming
  // the limit (the ticket unchanged) when they do not fit.
  // REQUIRES: `ticket` is one of this batcher's, ids >= 0 (checked: aborts otherwise).
  absl::Status AddIds(AdmissionTicket* ticket, int64_t ids);
  // The same decision as Admit() without holding room (a cheap early answer).
  absl::Status Admission() const;

  // Queues `request` (a Batch holding exactly one request, with candidates: checked,
  // aborts otherwise). OK: `done` will be called exactly once. Otherwise `done` is never
  // called and the batch goes back to the pool: INVALID_ARGUMENT when the batch fails
  // ValidateBatch() (batch_validation.h: the engine's one check of a request's layout and
  // rows; backends do not repeat it), RESOURCE_EXHAUSTED at once when
  // engine.queue_capacity requests are already waiting, UNAVAILABLE after Shutdown(). A request
  // whose `deadline` has passed when its batch forms completes with DEADLINE_EXCEEDED without being
  // computed; one whose `cancelled` flag (optional; it must stay valid until `done` runs) is set by
  // then completes with CANCELLED, also without being computed.
  absl::Status Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                      RequestDone done, const std::atomic<bool>* cancelled = nullptr);
  // The same for a request admitted by Admit(): its room is already held, so only
  // ValidateBatch() (INVALID_ARGUMENT), a ticket of another batcher or none (INTERNAL) or
  // Shutdown() (UNAVAILABLE) refuses it.
  // `ticket` is consumed either way.
  absl::Status Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                      RequestDone done, const std::atomic<bool>* cancelled, AdmissionTicket ticket);

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
    int64_t ids = 0;
  };
  // One slot per worker. The batcher fills the slot of an idle worker and sets
  // `assigned`; from then until the worker clears `assigned`, the worker alone touches
  // `parts` and `merged` (outside mu_). Both are reused: no allocation once warm.
  struct Slot {
    std::vector<Work> parts;  // the requests of the batch, in queue order
    Batch merged;             // their Append()ed copy when there are several
    int ran_candidates = 0;   // of the batch last run; 0 when it failed (not timed)
    BatcherClock::time_point picked;
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
  // True when `work` is not to be computed: its deadline passed, it was cancelled, or it
  // waited longer than max_queue_delay_ms. DropStatus() says which, for its caller.
  bool Unwanted(const Work& work, BatcherClock::time_point now) const;
  absl::Status DropStatus(const Work& work, BatcherClock::time_point now) const;
  // Admit() and Admission() without the shutdown check: room, ids and the predicted wait.
  absl::Status CheckRoom(int64_t ids, BatcherClock::time_point deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Enqueue(std::unique_ptr<Batch>* request, BatcherClock::time_point deadline,
                       RequestDone* done, const std::atomic<bool>* cancelled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  friend class AdmissionTicket;  // Unreserve()
  void Unreserve(int candidates, int64_t ids);
  void CompleteDropped();
  void RunBatch(int worker, Slot* slot, BatchResult* result);
  void Complete(Work* work, const absl::Status& status, const RequestResult& result);

  Backend* const backend_;
  const TimeSource* const time_;
  const BatcherOptions options_;
  const int workers_;
  const size_t capacity_;
  const BatcherClock::duration max_wait_;
  const BatcherClock::duration max_delay_;  // max_queue_delay_ms; zero: none

  mutable absl::Mutex mu_;
  // Ring buffer of queued requests: no allocation per Submit. Sized once.
  std::vector<Work> queue_ ABSL_GUARDED_BY(mu_);
  size_t queue_head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queue_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_candidates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_ids_ ABSL_GUARDED_BY(mu_) = 0;           // of the queued requests
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;              // tickets not yet submitted
  int64_t reserved_candidates_ ABSL_GUARDED_BY(mu_) = 0;  // their candidates
  int64_t reserved_ids_ ABSL_GUARDED_BY(mu_) = 0;         // their ids
  // How long queued work takes, learnt from every batch the workers ran
  // (batch_time_model.h).
  BatchTimeModel time_model_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot> slots_;                     // sized once
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);  // workers without a batch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool batcher_done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> queue_depth_{0};
  std::vector<Work> dropped_;  // batcher thread only: expired or cancelled

  ObjectPool<Batch> pool_;  // request batches

  std::vector<std::thread> threads_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown() callers
  bool joined_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCHER_H_

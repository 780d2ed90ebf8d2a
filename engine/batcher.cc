#include "engine/batcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/check.h"
#include "engine/thread_priority.h"
#include "spdlog/spdlog.h"

namespace fuserank::engine {
namespace {

double Seconds(BatcherClock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t Micros(BatcherClock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// Pooled request batches: one that holds more than this is freed instead of pooled (a rare
// large request must not pin its memory), and the pool holds at most kMaxPoolBytes.
constexpr size_t kMaxPooledBatchBytes = size_t{1} << 20;
constexpr size_t kMaxPoolBytes = size_t{64} << 20;

// A request batch for the pool: cleared (capacity kept, the model let go of), and what it
// still holds counted.
size_t RecycleBatch(Batch& batch) {
  batch.Clear();
  return batch.capacity_bytes();
}

// As many request batches as can be queued, plus two per worker (being merged, run).
ObjectPoolLimits BatchPoolLimits(size_t capacity, int workers) {
  ObjectPoolLimits limits;
  limits.max_objects = capacity + 2 * static_cast<size_t>(workers);
  limits.max_object_bytes = kMaxPooledBatchBytes;
  limits.max_bytes = kMaxPoolBytes;
  return limits;
}

// True when `result` holds `requests` well-formed slices of its items: what every
// backend promises for a batch it scored (a broken promise is a bug, not a request error).
bool WellFormed(const BatchResult& result, size_t requests) {
  if (result.result_begin.size() != requests + 1 || result.result_begin[0] != 0) return false;
  for (size_t r = 0; r < requests; ++r) {
    if (result.result_begin[r] > result.result_begin[r + 1]) return false;
  }
  return result.result_begin.back() <= result.items.size();
}

// Requests a slot's parts list is sized for up front; it grows past this only once.
constexpr size_t kReservedParts = 256;

}  // namespace

Batcher::Batcher(Backend* backend, BatcherOptions options, const TimeSource* time)
    : backend_(backend),
      time_(time),
      options_(options),
      workers_(std::max(1, backend->num_workers())),
      capacity_(static_cast<size_t>(std::max(1, options.queue_capacity))),
      max_wait_(std::chrono::microseconds(std::max(0, options.max_batch_wait_us))),
      max_delay_(std::chrono::milliseconds(std::max(0, options.max_queue_delay_ms))),
      time_model_(options.max_batch_candidates, workers_),
      pool_(BatchPoolLimits(capacity_, workers_), RecycleBatch) {
  slots_ = std::vector<Slot>(workers_);
  for (Slot& slot : slots_) slot.parts.reserve(std::min(capacity_, kReservedParts));
  dropped_.reserve(std::min(capacity_, kReservedParts));
  {
    absl::MutexLock lock(&mu_);
    queue_.resize(capacity_);
    idle_.reserve(workers_);
    for (int w = workers_ - 1; w >= 0; --w) idle_.push_back(w);
  }
  threads_.reserve(workers_ + 1);
  threads_.emplace_back([this] { BatcherLoop(); });
  for (int w = 0; w < workers_; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

Batcher::~Batcher() { Shutdown(); }

std::unique_ptr<Batch> Batcher::AcquireBatch() { return pool_.Acquire(); }

void Batcher::ReleaseBatch(std::unique_ptr<Batch> batch) { pool_.Release(std::move(batch)); }

void Batcher::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (joined_) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
  joined_ = true;
}

bool Batcher::HasWork() const {
  if (queue_size_ == 0) return stopping_;
  return !idle_.empty();
}

bool Batcher::ReadyToForm() const {
  if (!HasWork()) return false;
  if (queue_size_ == 0) return true;  // stopping: exit
  if (stopping_ || max_wait_ == BatcherClock::duration::zero()) return true;
  if (queued_candidates_ >= options_.max_batch_candidates) return true;  // full
  const int idle = static_cast<int>(idle_.size());
  if (idle > 1 || idle == workers_) return true;  // spare workers: waiting buys nothing
  return time_->Now() - queue_[queue_head_].enqueued >= max_wait_;
}

Batcher::Work Batcher::PopHead() {
  Work work = std::move(queue_[queue_head_]);
  queue_head_ = (queue_head_ + 1) % capacity_;
  --queue_size_;
  queued_candidates_ -= work.candidates;
  queued_ids_ -= work.ids;
  return work;
}

bool Batcher::Unwanted(const Work& work, BatcherClock::time_point now) const {
  if (work.deadline < now) return true;
  if (work.cancelled != nullptr && work.cancelled->load(std::memory_order_acquire)) return true;
  return max_delay_ > BatcherClock::duration::zero() && now - work.enqueued > max_delay_;
}

void Batcher::FormBatch(Slot* slot) {
  const BatcherClock::time_point now = time_->Now();
  const Model* model = nullptr;
  int64_t candidates = 0;
  int64_t ids = 0;
  while (queue_size_ > 0) {
    const Work& head = queue_[queue_head_];
    if (Unwanted(head, now)) {
      dropped_.push_back(PopHead());
      continue;
    }
    // A request never fails because of another: the merged batch keeps within both
    // budgets (a request alone fits max_batch_ids: the server refuses larger ones).
    if (!slot->parts.empty() && (head.batch->model.get() != model ||
                                 candidates + head.candidates > options_.max_batch_candidates ||
                                 ids + head.ids > options_.max_batch_ids)) {
      break;
    }
    model = head.batch->model.get();
    candidates += head.candidates;
    ids += head.ids;
    slot->parts.push_back(PopHead());
  }
  slot->picked = now;
  queue_depth_.store(static_cast<int>(queue_size_), std::memory_order_relaxed);
}

void Batcher::BatcherLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      while (!ReadyToForm()) {
        if (HasWork()) {
          // The last free worker while others compute: give the oldest request until
          // max_batch_wait_us for company. Arrivals and freed workers wake us earlier.
          time_->AwaitUntil(&mu_, absl::Condition(this, &Batcher::ReadyToForm),
                            queue_[queue_head_].enqueued + max_wait_);
        } else {
          mu_.Await(absl::Condition(this, &Batcher::HasWork));
        }
      }
      if (queue_size_ == 0) {  // stopping, and every queued request has been formed
        batcher_done_ = true;
        return;
      }
      const int worker = idle_.back();
      Slot& slot = slots_[worker];
      FormBatch(&slot);
      if (!slot.parts.empty()) {
        idle_.pop_back();
        slot.assigned = true;
      }
    }
    CompleteDropped();
  }
}

absl::Status Batcher::DropStatus(const Work& work, BatcherClock::time_point now) const {
  const int64_t waited_us = Micros(now - work.enqueued);
  // The deadline wins over the cancellation it usually causes.
  if (work.deadline < now) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the deadline passed after ", waited_us, " us in the queue; the request was not computed"));
  }
  if (work.cancelled != nullptr && work.cancelled->load(std::memory_order_acquire)) {
    return absl::CancelledError(absl::StrCat("the client cancelled the request after ", waited_us,
                                             " us in the queue; it was not computed"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "shed after ", waited_us / 1000, " ms in the queue, more than engine.max_queue_delay_ms (",
      options_.max_queue_delay_ms, "); it was not computed; retry with backoff"));
}

void Batcher::CompleteDropped() {
  const BatcherClock::time_point now = time_->Now();
  for (Work& work : dropped_) {
    Complete(&work, DropStatus(work, now), RequestResult{});
  }
  dropped_.clear();
}

void Batcher::WorkerLoop(int worker) {
  // Below the threads that admit and refuse calls (engine/thread_priority.h).
  if (absl::Status s = LowerCurrentThreadPriority(options_.worker_nice); !s.ok()) {
    spdlog::warn("batcher worker {}: engine.worker_nice not applied: {}", worker, s.ToString());
  }
  BatchResult result;  // reused: no allocation per batch once warm
  Slot& slot = slots_[worker];
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [&]()
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { return slot.assigned || batcher_done_; };
      mu_.Await(absl::Condition(&has_work));
      if (!slot.assigned) return;  // the batcher is done and left nothing for us
    }
    RunBatch(worker, &slot, &result);
    absl::MutexLock lock(&mu_);
    // The whole time the batch held its worker (merge, run, answers), on the Batcher's
    // clock (the wall clock in the server): what a queued request waits for, CPU shared
    // with the transport included. Every batch counts, with a queue behind it or not: were
    // only batches that left requests queued counted, a wait learnt too long would let the
    // door keep the queue too short for any batch to teach it otherwise.
    time_model_.Note(slot.ran_candidates, Seconds(time_->Now() - slot.picked));
    slot.assigned = false;
    idle_.push_back(worker);
  }
}

void Batcher::RunBatch(int worker, Slot* slot, BatchResult* result) {
  std::vector<Work>& parts = slot->parts;
  Batch* batch = parts[0].batch.get();
  if (parts.size() > 1) {  // merge outside mu_: Submit() is not held up by the copy
    for (const Work& part : parts) slot->merged.Append(*part.batch);
    batch = &slot->merged;
  }
  // The latest deadline, not the earliest: a wait that ends at one request's deadline would
  // fail the others' rows, while no request gains from an answer after the latest.
  batch->deadline = BatcherClock::time_point::min();
  for (const Work& part : parts) batch->deadline = std::max(batch->deadline, part.deadline);
  const BatcherClock::time_point start = time_->Now();
  result->Clear();
  absl::Status status = backend_->Run(worker, *batch, result);
  // A failed batch (a device fault, a remote fetch refused) says nothing of how long a
  // batch takes: it is not noted.
  slot->ran_candidates = status.ok() ? batch->num_candidates() : 0;
  FUSERANK_CHECK(!status.ok() || WellFormed(*result, parts.size()))
      << "the backend " << backend_->device() << " returned malformed results for "
      << result->result_begin.size() - 1 << " requests, expected " << parts.size();
  RequestResult request_result;
  request_result.stages = result->stages;
  request_result.graph_capture_failures = result->graph_capture_failures;
  request_result.batch_candidates = batch->num_candidates();
  request_result.batch_requests = static_cast<int>(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    Work& work = parts[r];
    request_result.queue_seconds = Seconds(start - work.enqueued);
    request_result.position = static_cast<int>(r);
    request_result.items = {};
    if (status.ok() && !result->request_errors.empty() && !result->request_errors[r].ok()) {
      Complete(&work, result->request_errors[r], request_result);
      continue;
    }
    if (status.ok()) {
      const uint32_t begin = result->result_begin[r];
      const uint32_t end = result->result_begin[r + 1];
      request_result.items = absl::MakeConstSpan(result->items.data() + begin, end - begin);
    }
    Complete(&work, status, request_result);
  }
  parts.clear();
  slot->merged.Clear();  // keeps capacity; drops its hold on the model
}

void Batcher::Complete(Work* work, const absl::Status& status, const RequestResult& result) {
  RequestDone done = std::move(work->done);
  work->done = nullptr;
  work->cancelled = nullptr;
  done(status, result);
  ReleaseBatch(std::move(work->batch));
}

}  // namespace fuserank::engine

// The Batcher's admission (batcher.h, "Admission"): tickets that hold queue room from
// Admit() to Submit(), the room, id and predicted-wait checks, and Submit() itself.
// Split from batcher.cc, which forms and runs the batches; same class, same mutex.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/batch_validation.h"
#include "engine/batcher.h"
#include "engine/check.h"

namespace fuserank::engine {
namespace {

double Seconds(BatcherClock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t Micros(BatcherClock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

absl::Status QueueFull(size_t capacity) {
  return absl::ResourceExhaustedError(
      absl::StrCat("the request queue is full (engine.queue_capacity = ", capacity,
                   " requests waiting); retry with backoff"));
}

absl::Status QueuedIdsFull(int64_t queued, int64_t ids, int64_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat("the request queue is full (", queued, " ids queued, this request adds ", ids,
                   "; engine.max_queued_ids = ", limit, "); retry with backoff"));
}

absl::Status ShuttingDown() { return absl::UnavailableError("the server is shutting down"); }

}  // namespace

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    batcher_ = std::exchange(other.batcher_, nullptr);
    candidates_ = std::exchange(other.candidates_, 0);
    ids_ = std::exchange(other.ids_, 0);
  }
  return *this;
}

void AdmissionTicket::Release() {
  if (batcher_ == nullptr) return;
  batcher_->Unreserve(candidates_, ids_);
  batcher_ = nullptr;
  candidates_ = 0;
  ids_ = 0;
}

void Batcher::Unreserve(int candidates, int64_t ids) {
  absl::MutexLock lock(&mu_);
  --reserved_;
  reserved_candidates_ -= candidates;
  reserved_ids_ -= ids;
}

absl::Status Batcher::CheckRoom(int64_t ids, BatcherClock::time_point deadline) const {
  if (queue_size_ + reserved_ >= capacity_) return QueueFull(capacity_);
  if (queued_ids_ + reserved_ids_ + ids > options_.max_queued_ids) {
    return QueuedIdsFull(queued_ids_ + reserved_ids_, ids, options_.max_queued_ids);
  }
  const bool bounded_wait = max_delay_ > BatcherClock::duration::zero();
  const bool has_deadline = deadline != BatcherClock::time_point::max();
  const int64_t ahead = queued_candidates_ + reserved_candidates_;
  if ((!bounded_wait && !has_deadline) || ahead == 0 || !time_model_.trained()) {
    return absl::OkStatus();
  }
  const double wait_s = time_model_.WaitSeconds(ahead);
  const int64_t wait_ms = static_cast<int64_t>(wait_s * 1e3);
  if (bounded_wait && wait_s > Seconds(max_delay_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request queue is standing: a new request would wait about ", wait_ms,
                     " ms (", ahead, " candidates ahead, full batches at about ",
                     static_cast<int64_t>(time_model_.FullBatchRate()),
                     " per second), more than engine.max_queue_delay_ms (",
                     options_.max_queue_delay_ms, "); retry with backoff"));
  }
  const BatcherClock::time_point now = time_->Now();
  if (has_deadline && Seconds(deadline - now) < wait_s) {
    // The deadline would pass before the work started: SPEC's DEADLINE_EXCEEDED, at once.
    return absl::DeadlineExceededError(
        absl::StrCat("the request's deadline is ", Micros(deadline - now) / 1000,
                     " ms away, but it would wait about ", wait_ms,
                     " ms in the queue: it was not computed; retry with a longer deadline"));
  }
  return absl::OkStatus();
}

absl::Status Batcher::Admission() const {
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown();
  return CheckRoom(0, BatcherClock::time_point::max());
}

absl::StatusOr<AdmissionTicket> Batcher::Admit(BatcherClock::time_point deadline, int candidates) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown();
  if (absl::Status room = CheckRoom(0, deadline); !room.ok()) return room;
  ++reserved_;
  reserved_candidates_ += std::max(0, candidates);
  AdmissionTicket ticket;
  ticket.batcher_ = this;
  ticket.candidates_ = std::max(0, candidates);
  return ticket;
}

absl::Status Batcher::AddIds(AdmissionTicket* ticket, int64_t ids) {
  FUSERANK_CHECK(ticket != nullptr && ticket->batcher_ == this && ids >= 0)
      << "Batcher::AddIds takes a ticket of this batcher and ids >= 0";
  absl::MutexLock lock(&mu_);
  if (queued_ids_ + reserved_ids_ + ids > options_.max_queued_ids) {
    return QueuedIdsFull(queued_ids_ + reserved_ids_, ids, options_.max_queued_ids);
  }
  reserved_ids_ += ids;
  ticket->ids_ += ids;
  return absl::OkStatus();
}

absl::Status Batcher::Enqueue(std::unique_ptr<Batch>* request, BatcherClock::time_point deadline,
                              RequestDone* done, const std::atomic<bool>* cancelled) {
  Work& work = queue_[(queue_head_ + queue_size_) % capacity_];
  work.candidates = (*request)->num_candidates();
  work.ids = static_cast<int64_t>((*request)->user.rows.size() + (*request)->item.rows.size());
  work.batch = std::move(*request);
  work.done = std::move(*done);
  work.cancelled = cancelled;
  work.enqueued = time_->Now();
  work.deadline = deadline;
  ++queue_size_;
  queued_candidates_ += work.candidates;
  queued_ids_ += work.ids;
  queue_depth_.store(static_cast<int>(queue_size_), std::memory_order_relaxed);
  return absl::OkStatus();
}

namespace {

// What every Submit() checks first: a request is validated once, here, where it enters the
// engine (nothing walks its ids again); that it is one request is its caller's contract.
absl::Status CheckRequest(const std::unique_ptr<Batch>& request) {
  FUSERANK_CHECK(request != nullptr && request->num_requests() == 1 &&
                 request->num_candidates() > 0)
      << "Batcher::Submit takes one request with candidates";
  return ValidateBatch(*request);
}

}  // namespace

absl::Status Batcher::Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                             RequestDone done, const std::atomic<bool>* cancelled) {
  absl::Status status = CheckRequest(request);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    const int64_t ids = static_cast<int64_t>(request->user.rows.size() + request->item.rows.size());
    if (stopping_) {
      status = ShuttingDown();
    } else if (queue_size_ + reserved_ >= capacity_) {
      status = QueueFull(capacity_);
    } else if (queued_ids_ + reserved_ids_ + ids > options_.max_queued_ids) {
      status = QueuedIdsFull(queued_ids_ + reserved_ids_, ids, options_.max_queued_ids);
    } else {
      return Enqueue(&request, deadline, &done, cancelled);
    }
  }
  ReleaseBatch(std::move(request));
  return status;
}

absl::Status Batcher::Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                             RequestDone done, const std::atomic<bool>* cancelled,
                             AdmissionTicket ticket) {
  absl::Status status = CheckRequest(request);
  if (status.ok() && ticket.batcher_ != this) {
    // The callers admit before they decode; a request whose wire scan and parse disagree
    // on its candidates could come without a ticket, so this stays a status.
    status = absl::InternalError("Batcher::Submit takes a ticket of this batcher");
  } else if (status.ok()) {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      status = ShuttingDown();
    } else {
      --reserved_;  // the ticket's room becomes the queued request's
      reserved_candidates_ -= ticket.candidates_;
      reserved_ids_ -= ticket.ids_;
      ticket.batcher_ = nullptr;
      return Enqueue(&request, deadline, &done, cancelled);
    }
  }
  ReleaseBatch(std::move(request));
  return status;  // an unused ticket gives its room back as it goes
}

}  // namespace fuserank::engine

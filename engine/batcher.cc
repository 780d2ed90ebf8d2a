#include "engine/batcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fuserank::engine {
namespace {

double Seconds(BatcherClock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Batcher::Batcher(Backend* backend, BatcherOptions options) : backend_(backend), options_(options) {
  const int workers = std::max(1, backend_->num_workers());
  const size_t capacity = static_cast<size_t>(std::max(1, options_.queue_capacity));
  pool_limit_ = capacity + 2 * static_cast<size_t>(workers);
  slots_.resize(workers);
  {
    absl::MutexLock lock(&mu_);
    queue_.resize(capacity);
    idle_.reserve(workers);
    for (int w = workers - 1; w >= 0; --w) idle_.push_back(w);
  }
  threads_.reserve(workers + 1);
  threads_.emplace_back([this] { BatcherLoop(); });
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

Batcher::~Batcher() { Shutdown(); }

std::unique_ptr<Batch> Batcher::AcquireBatch() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<Batch> batch = std::move(pool_.back());
      pool_.pop_back();
      return batch;
    }
  }
  return std::make_unique<Batch>();
}

void Batcher::ReleaseBatch(std::unique_ptr<Batch> batch) {
  if (batch == nullptr) return;
  batch->Clear();
  absl::MutexLock lock(&pool_mu_);
  if (pool_.size() < pool_limit_) pool_.push_back(std::move(batch));
}

absl::Status Batcher::Submit(std::unique_ptr<Batch> request, BatcherClock::time_point deadline,
                             RequestDone done) {
  absl::Status status;
  if (request == nullptr || request->num_requests() != 1 || request->num_candidates() == 0) {
    status = absl::InternalError("Batcher::Submit takes one request with candidates");
  } else {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      status = absl::UnavailableError("the server is shutting down");
    } else if (queue_size_ == queue_.size()) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("the request queue is full (engine.queue_capacity = ", queue_.size(),
                       " requests waiting); retry with backoff"));
    } else {
      Work& work = queue_[(queue_head_ + queue_size_) % queue_.size()];
      work.batch = std::move(request);
      work.done = std::move(done);
      work.enqueued = BatcherClock::now();
      work.deadline = deadline;
      ++queue_size_;
      queue_depth_.store(static_cast<int>(queue_size_), std::memory_order_relaxed);
      return absl::OkStatus();
    }
  }
  ReleaseBatch(std::move(request));
  return status;
}

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

void Batcher::BatcherLoop() {
  std::vector<Work> expired;  // completed outside the lock
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto can_form = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return (queue_size_ > 0 && !idle_.empty()) || (stopping_ && queue_size_ == 0);
      };
      mu_.Await(absl::Condition(&can_form));
      if (queue_size_ == 0) {  // stopping, and every queued request has been formed
        batcher_done_ = true;
        return;
      }
      const int worker = idle_.back();
      Formed& formed = slots_[worker].formed;
      const BatcherClock::time_point now = BatcherClock::now();
      // One request per batch for now. Dynamic batching goes here: keep taking requests
      // while the merged candidates stay <= max_batch_candidates, waiting up to
      // max_batch_wait_us for more, and Append() them into formed.merged.
      while (queue_size_ > 0 && formed.parts.empty()) {
        Work& head = queue_[queue_head_];
        queue_head_ = (queue_head_ + 1) % queue_.size();
        --queue_size_;
        if (head.deadline < now) {
          expired.push_back(std::move(head));
        } else {
          formed.parts.push_back(std::move(head));
        }
      }
      queue_depth_.store(static_cast<int>(queue_size_), std::memory_order_relaxed);
      if (!formed.parts.empty()) {
        idle_.pop_back();
        slots_[worker].assigned = true;
      }
    }
    for (Work& work : expired) {
      const double waited = Seconds(BatcherClock::now() - work.enqueued);
      Complete(&work,
               absl::DeadlineExceededError(
                   absl::StrCat("the deadline passed after ", static_cast<int64_t>(waited * 1e6),
                                " us in the queue; the request was not computed")),
               RequestResult{});
    }
    expired.clear();
  }
}

void Batcher::WorkerLoop(int worker) {
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
    RunBatch(worker, &slot.formed, &result);
    absl::MutexLock lock(&mu_);
    slot.assigned = false;
    idle_.push_back(worker);
  }
}

void Batcher::RunBatch(int worker, Formed* formed, BatchResult* result) {
  const Batch& batch = formed->merged != nullptr ? *formed->merged : *formed->parts[0].batch;
  const BatcherClock::time_point start = BatcherClock::now();
  result->Clear();
  absl::Status status = backend_->Run(worker, batch, result);
  if (status.ok() && result->result_begin.size() != formed->parts.size() + 1) {
    status = absl::InternalError(absl::StrCat("the backend returned results for ",
                                              result->result_begin.size() - 1,
                                              " requests, expected ", formed->parts.size()));
  }
  RequestResult request_result;
  request_result.stages = result->stages;
  request_result.batch_candidates = batch.num_candidates();
  for (size_t r = 0; r < formed->parts.size(); ++r) {
    Work& work = formed->parts[r];
    request_result.queue_seconds = Seconds(start - work.enqueued);
    request_result.position = static_cast<int>(r);
    request_result.items = {};
    if (status.ok()) {
      const uint32_t begin = result->result_begin[r];
      const uint32_t end = result->result_begin[r + 1];
      request_result.items = absl::MakeConstSpan(result->items.data() + begin, end - begin);
    }
    Complete(&work, status, request_result);
  }
  formed->parts.clear();
  ReleaseBatch(std::move(formed->merged));
}

void Batcher::Complete(Work* work, const absl::Status& status, const RequestResult& result) {
  RequestDone done = std::move(work->done);
  work->done = nullptr;
  done(status, result);
  ReleaseBatch(std::move(work->batch));
}

}  // namespace fuserank::engine

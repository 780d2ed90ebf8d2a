#include "server/reply_watch.h"

#include <algorithm>

#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {

ReplyWatch::ReplyWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {
  thread_ = std::thread([this] { Run(); });
  thread_id_ = thread_.get_id();
}

ReplyWatch::~ReplyWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void ReplyWatch::Watch(Entry* entry) {
  entry->since = Clock::now();
  absl::MutexLock lock(&mu_);
  entry->prev = tail_;
  entry->next = nullptr;
  if (tail_ != nullptr) {
    tail_->next = entry;
  } else {
    head_ = entry;
  }
  tail_ = entry;
  entry->listed = true;
}

void ReplyWatch::Done(Entry* entry) {
  absl::MutexLock lock(&mu_);
  if (entry->listed) {
    Unlink(entry);
    return;
  }
  // Being cancelled: its context must live until TryCancel() returns, unless this OnDone
  // runs inside that TryCancel() (then waiting would never end).
  if (cancelling_ == entry && std::this_thread::get_id() != thread_id_) {
    auto not_cancelling = [this, entry]()
                              ABSL_NO_THREAD_SAFETY_ANALYSIS { return cancelling_ != entry; };
    mu_.Await(absl::Condition(&not_cancelling));
  }
}

void ReplyWatch::Unlink(Entry* entry) {
  if (entry->prev != nullptr) {
    entry->prev->next = entry->next;
  } else {
    head_ = entry->next;
  }
  if (entry->next != nullptr) {
    entry->next->prev = entry->prev;
  } else {
    tail_ = entry->prev;
  }
  entry->prev = entry->next = nullptr;
  entry->listed = false;
}

void ReplyWatch::Run() {
  const auto tick = std::clamp<Clock::duration>(timeout_ / 4, std::chrono::milliseconds(10),
                                                std::chrono::milliseconds(250));
  mu_.Lock();
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(tick));
    if (stop_) break;
    uint64_t cancelled = 0;
    const Clock::time_point now = Clock::now();
    while (head_ != nullptr && now - head_->since >= timeout_) {
      Entry* entry = head_;
      Unlink(entry);
      cancelling_ = entry;
      grpc::CallbackServerContext* context = entry->context;
      mu_.Unlock();
      context->TryCancel();  // the call's OnDone may run in here
      mu_.Lock();
      cancelling_ = nullptr;  // wakes a Done() waiting on it (Await re-checks at Unlock)
      ++cancelled;
    }
    if (cancelled > 0) {
      cancelled_.fetch_add(cancelled, std::memory_order_relaxed);
      mu_.Unlock();
      spdlog::warn(
          "cancelled {} call(s) whose answer the client did not take within "
          "server.reply_timeout_seconds ({} s): their in-flight slots are free again",
          cancelled, std::chrono::duration<double>(timeout_).count());
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

}  // namespace fuserank::server

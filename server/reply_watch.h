// Calls whose answer the client does not take (server.reply_timeout_seconds). A call
// holds its in-flight slot (CallLimiter) until gRPC reports it done, and gRPC does that
// only once the answer has been written to the peer: a client that stops reading (HTTP/2
// flow control: it never opens its window) kept its calls, and with them every slot of the
// port, for as long as its connection stayed open, and every other client was refused.
// A call is watched from just before its Finish() until its OnDone; one still not done
// `timeout` after its Finish() is cancelled (ServerContext::TryCancel: gRPC resets the
// stream, the answer is dropped and the call's OnDone runs, freeing its slot). One per
// ranking port, shared by its services; a thread of its own wakes about four times a
// timeout. Thread-safe.
#ifndef FUSERANK_SERVER_REPLY_WATCH_H_
#define FUSERANK_SERVER_REPLY_WATCH_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fuserank::server {

class ReplyWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Lives in a service's call object (reused from call to call): the watch's list links.
  struct Entry {
    grpc::CallbackServerContext* context = nullptr;  // set by the service as the call starts
    Clock::time_point since;
    Entry* prev = nullptr;
    Entry* next = nullptr;
    bool listed = false;  // in the list (guarded by the watch's mutex)
  };

  explicit ReplyWatch(std::chrono::milliseconds timeout);
  ~ReplyWatch();  // stops the thread; REQUIRES: no call watched any more

  // Just before the call's Finish() (its OnDone may run from Finish() on, on any thread).
  // REQUIRES: entry->context is the call's.
  void Watch(Entry* entry);
  // In the call's OnDone, before its call object is reused or freed: off the list, or,
  // when the watch thread is cancelling it, once that TryCancel() has returned (at once
  // when this OnDone runs inside that TryCancel()).
  void Done(Entry* entry);

  // Calls cancelled so far.
  uint64_t cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  ReplyWatch(const ReplyWatch&) = delete;
  ReplyWatch& operator=(const ReplyWatch&) = delete;

 private:
  void Run() ABSL_NO_THREAD_SAFETY_ANALYSIS;  // unlocks around TryCancel()
  void Unlink(Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock::duration timeout_;
  absl::Mutex mu_;
  Entry* head_ ABSL_GUARDED_BY(mu_) = nullptr;  // oldest Watch() first
  Entry* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Taken off the list, its TryCancel() running on the watch thread (which never touches
  // it after that returns: its OnDone may have run inside).
  Entry* cancelling_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> cancelled_{0};
  std::thread::id thread_id_;
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_REPLY_WATCH_H_

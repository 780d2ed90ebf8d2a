// The bound on calls in flight on the ranking port (server.max_inflight_requests): Rank
// and ModelInfer calls together, counted from the moment gRPC hands a call over until it
// is done, and checked before anything reads the request. One per server, shared by the
// services of that port. Thread-safe (one atomic).
#ifndef FUSERANK_SERVER_CALL_LIMITER_H_
#define FUSERANK_SERVER_CALL_LIMITER_H_

#include <atomic>

namespace fuserank::server {

class CallLimiter {
 public:
  explicit CallLimiter(int limit) : limit_(limit) {}

  // Counts a call in; true when it is within the limit. Every Enter() is matched by one
  // Leave() when the call is done, admitted or not.
  bool Enter() { return inflight_.fetch_add(1, std::memory_order_relaxed) + 1 <= limit_; }
  void Leave() { inflight_.fetch_sub(1, std::memory_order_relaxed); }

  int limit() const { return limit_; }
  int inflight() const { return inflight_.load(std::memory_order_relaxed); }

 private:
  const int limit_;
  std::atomic<int> inflight_{0};
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_CALL_LIMITER_H_

// The last step of a ranking service's admission, shared by Rank and ModelInfer: a call is
// accepted (and then waited for at shutdown) or, once the server has started shutting down,
// refused with UNAVAILABLE. Accept() and Refuse() are ordered by one mutex, so a call that
// got in is always one that WaitIdle() waits for. Thread-safe.
#ifndef FUSERANK_SERVER_ACCEPT_GATE_H_
#define FUSERANK_SERVER_ACCEPT_GATE_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fuserank::server {

class AcceptGate {
 public:
  // OK: accepted, to be matched by one Done(). UNAVAILABLE once Refuse() has run.
  absl::Status Accept() {
    absl::MutexLock lock(&mu_);
    if (refusing_) {
      return absl::UnavailableError("the server is shutting down; retry on another replica");
    }
    ++accepted_;
    return absl::OkStatus();
  }
  void Done() {
    absl::MutexLock lock(&mu_);
    --accepted_;
  }
  // From now on Accept() refuses.
  void Refuse() {
    absl::MutexLock lock(&mu_);
    refusing_ = true;
  }
  // Waits until every accepted call is done; false when `deadline` came first.
  bool WaitIdle(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return accepted_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  }

 private:
  absl::Mutex mu_;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;  // accepted calls not yet done
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ACCEPT_GATE_H_

// One thread that runs a kind of the Admin service's slow work (hot-set swaps and
// rebuilds; or model reloads) in arrival order, from a queue of at most `capacity` waiting
// tasks: a client cannot make the server start a thread per call, and a full queue is
// refused at once (RESOURCE_EXHAUSTED) instead of piling up. With capacity 0 a task runs
// only when none is running: one more is refused, naming the task in progress. A task whose
// call has gone (cancelled, deadline passed) while it waited is dropped, not run. Close()
// refuses new tasks and drops the waiting ones (each is told, so its call can answer
// UNAVAILABLE) while the task in progress goes on; Stop() also waits for that one.
// Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_WORKER_H_
#define FUSERANK_SERVER_ADMIN_WORKER_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fuserank::server {

class AdminWorker {
 public:
  // What answers a task's call; run once the worker is free for the next task, so a
  // client that gets its answer and posts again is never told the worker is busy.
  using Answer = std::function<void()>;
  struct Task {
    std::function<Answer()> run;  // on the worker thread; may return null
    // Instead of run, told why: UNAVAILABLE when the worker is closed first, or what
    // `wanted` returned.
    std::function<void(const absl::Status&)> drop;
    // What the task does, for the refusal of a task posted while it runs ("a reload of
    // model 'ctr' from '/models/ctr/8/ctr.yaml'").
    std::string what;
    // Checked on the worker just before run (may be null: always wanted). Not OK (the
    // call was cancelled or its deadline passed while it waited): run is skipped and the
    // status goes to drop, so nothing changes for a client that has stopped waiting.
    std::function<absl::Status()> wanted;
  };

  // Starts the thread. `runs` names the work for messages ("hot-set changes", "reloads").
  // REQUIRES: capacity >= 0.
  AdminWorker(int capacity, std::string runs);
  ~AdminWorker();  // Stop()
  AdminWorker(const AdminWorker&) = delete;
  AdminWorker& operator=(const AdminWorker&) = delete;

  // Queues `task`. RESOURCE_EXHAUSTED when `capacity` tasks are already waiting (with
  // capacity 0: when a task runs, naming it), UNAVAILABLE after Close(); the task is then
  // neither run nor dropped.
  absl::Status Post(Task task);

  // From now on Post is UNAVAILABLE; the waiting tasks are dropped (UNAVAILABLE) before this
  // returns; the task in progress goes on. Idempotent.
  void Close();
  // Close(), then waits for the task in progress and joins the thread. Idempotent.
  void Stop();

  int capacity() const { return capacity_; }

 private:
  void Loop();

  const int capacity_;
  const std::string runs_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::string running_what_ ABSL_GUARDED_BY(mu_);
  absl::Time running_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_WORKER_H_

// The one thread that runs the Admin service's slow work (hot-set swaps and rebuilds, model
// reloads) in arrival order, from a queue of at most `capacity` waiting tasks: a client
// cannot make the server start a thread per call, and a full queue is refused at once
// (RESOURCE_EXHAUSTED) instead of piling up. Stop() lets the task in progress finish and
// drops the waiting ones (each is told, so its call can answer UNAVAILABLE).
// Thread-safe.
#ifndef FUSERANK_SERVER_ADMIN_WORKER_H_
#define FUSERANK_SERVER_ADMIN_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace fuserank::server {

class AdminWorker {
 public:
  struct Task {
    std::function<void()> run;   // on the worker thread
    std::function<void()> drop;  // instead of run, when the worker stops first
  };

  // Starts the thread. REQUIRES: capacity >= 1.
  explicit AdminWorker(int capacity);
  ~AdminWorker();  // Stop()
  AdminWorker(const AdminWorker&) = delete;
  AdminWorker& operator=(const AdminWorker&) = delete;

  // Queues `task`. RESOURCE_EXHAUSTED when `capacity` tasks are already waiting,
  // UNAVAILABLE after Stop(); the task is then neither run nor dropped.
  absl::Status Post(Task task);

  // Waits for the task in progress, drops the waiting ones, joins the thread. Idempotent.
  void Stop();

  int capacity() const { return capacity_; }

 private:
  void Loop();

  const int capacity_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_ADMIN_WORKER_H_

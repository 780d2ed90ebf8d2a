#include "server/admin_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fuserank::server {

AdminWorker::AdminWorker(int capacity) : capacity_(capacity), thread_([this] { Loop(); }) {}

AdminWorker::~AdminWorker() { Stop(); }

absl::Status AdminWorker::Post(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (static_cast<int>(queue_.size()) >= capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the admin service is busy: ", queue_.size(),
        " calls are already waiting for the one admin worker (hot-set changes and reloads run "
        "one at a time); retry later"));
  }
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

void AdminWorker::Loop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task.run();
  }
}

void AdminWorker::Stop() {
  std::deque<Task> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  if (thread_.joinable()) thread_.join();
  for (Task& task : dropped) {
    if (task.drop) task.drop();
  }
}

}  // namespace fuserank::server

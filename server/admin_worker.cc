#include "server/admin_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fuserank::server {
namespace {

absl::Status ShuttingDown() { return absl::UnavailableError("the server is shutting down"); }

}  // namespace

AdminWorker::AdminWorker(int capacity, std::string runs)
    : capacity_(capacity), runs_(std::move(runs)), thread_([this] { Loop(); }) {}

AdminWorker::~AdminWorker() { Stop(); }

absl::Status AdminWorker::Post(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return ShuttingDown();
  if (capacity_ == 0 && (running_ || !queue_.empty())) {
    const std::string& what = running_ ? running_what_ : queue_.front().what;
    const double seconds = running_ ? absl::ToDoubleSeconds(absl::Now() - running_since_) : 0;
    return absl::ResourceExhaustedError(
        absl::StrCat("the admin service is busy: ", what.empty() ? "another call" : what,
                     " is in progress", running_ ? absl::StrFormat(" (for %.1f s)", seconds) : "",
                     ", and ", runs_, " run one at a time; retry when it has finished"));
  }
  if (static_cast<int>(queue_.size()) >= capacity_ && capacity_ > 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the admin service is busy: ", queue_.size(),
                     " calls are already waiting for the admin worker that runs ", runs_,
                     " one at a time; retry later"));
  }
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

void AdminWorker::Loop() {
  Answer answer;
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      running_ = false;
      running_what_.clear();
    }
    if (answer) answer();  // after the worker is free
    answer = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      running_what_ = task.what;
      running_since_ = absl::Now();
    }
    const absl::Status wanted = task.wanted ? task.wanted() : absl::OkStatus();
    if (wanted.ok()) {
      answer = task.run();
    } else if (task.drop) {
      answer = [drop = std::move(task.drop), wanted] { drop(wanted); };
    }
  }
}

void AdminWorker::Close() {
  std::deque<Task> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (Task& task : dropped) {
    if (task.drop) task.drop(ShuttingDown());
  }
}

void AdminWorker::Stop() {
  Close();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fuserank::server

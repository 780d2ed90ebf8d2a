#include "server/version_reaper.h"

#include "server/served_models.h"

namespace fuserank::server {

VersionReaper::VersionReaper() : thread_([this] { Loop(); }) {}

VersionReaper::~VersionReaper() { Stop(); }

void VersionReaper::Retire(ServedModel* version) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(version);
      return;
    }
  }
  delete version;
  destroyed_.fetch_add(1);
}

void VersionReaper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void VersionReaper::Loop() {
  while (true) {
    ServedModel* version = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      version = queue_.front();
      queue_.pop_front();
    }
    delete version;  // outside the lock: joins the version's batcher threads
    destroyed_.fetch_add(1);
  }
}

}  // namespace fuserank::server

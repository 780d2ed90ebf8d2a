#include "server/memory_trimmer.h"

#include <malloc.h>

#include <algorithm>

namespace fuserank::server {
namespace {

constexpr absl::Duration kQuiet = absl::Milliseconds(50);
constexpr absl::Duration kEvery = absl::Milliseconds(250);

}  // namespace

MemoryTrimmer::MemoryTrimmer() : thread_([this] { Loop(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void MemoryTrimmer::Noted() {
  absl::MutexLock lock(&mu_);
  pending_ = true;
  last_noted_ = absl::Now();
}

int MemoryTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

void MemoryTrimmer::Loop() {
  auto woken = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pending_ || stopping_; };
  auto stopped = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; };
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&woken));
      // Quiet for kQuiet since the last large request, or kEvery since the last trim.
      for (;;) {
        if (stopping_) return;
        const absl::Time now = absl::Now();
        const absl::Time due = std::min(last_noted_ + kQuiet, last_trim_ + kEvery);
        if (now >= due) break;
        mu_.AwaitWithTimeout(absl::Condition(&stopped), due - now);
      }
      pending_ = false;
      last_trim_ = absl::Now();
    }
    malloc_trim(0);
    absl::MutexLock lock(&mu_);
    ++trims_;
  }
}

}  // namespace fuserank::server

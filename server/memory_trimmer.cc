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

void MemoryTrimmer::CallReceived(size_t wire_bytes) {
  const size_t live = live_bytes_.fetch_add(wire_bytes, std::memory_order_relaxed) + wire_bytes;
  size_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

bool MemoryTrimmer::CallDone(size_t wire_bytes, size_t held_bytes) {
  const size_t live = live_bytes_.fetch_sub(wire_bytes, std::memory_order_relaxed) - wire_bytes;
  bool trim = held_bytes >= kLargeRequestBytes;
  // The end of a spike: the peak is reset to what is live now only if no call raised it
  // since it was read (a raised peak is a spike still going on); of racing calls that see
  // the end, the one whose exchange succeeds takes it.
  size_t peak = peak_bytes_.load(std::memory_order_relaxed);
  if (peak >= kSpikeBytes && live <= peak / 8 &&
      peak_bytes_.compare_exchange_strong(peak, live, std::memory_order_relaxed)) {
    trim = true;
  }
  if (trim) Noted();
  return trim;
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

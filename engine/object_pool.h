// A bounded pool of heap objects reused from request to request (request batches, gRPC
// calls), so that a warm server allocates none of them per request. The pool keeps at
// most `max_objects` objects and `max_bytes` of what they hold; an object that holds more
// than `max_object_bytes` is freed instead of kept, so one rare large request never pins
// its memory. The `recycle` hook readies a returned object for its next use (clears it,
// lets go of what it must not keep alive, may trim its large buffers) and says how many
// bytes it still holds. Thread-safe: Acquire() and Release() from any thread.
#ifndef FUSERANK_ENGINE_OBJECT_POOL_H_
#define FUSERANK_ENGINE_OBJECT_POOL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fuserank::engine {

struct ObjectPoolLimits {
  size_t max_objects = 256;            // objects kept
  size_t max_object_bytes = SIZE_MAX;  // an object holding more is freed on return
  size_t max_bytes = SIZE_MAX;         // bytes held by all the kept objects together
};

template <typename T>
class ObjectPool {
 public:
  // Called on each returned object, outside the pool's lock; returns the heap bytes the
  // object still holds (0 where the pool need not count them).
  using Recycle = std::function<size_t(T&)>;

  ObjectPool(ObjectPoolLimits limits, Recycle recycle)
      : limits_(limits), recycle_(std::move(recycle)) {
    absl::MutexLock lock(&mu_);
    kept_.reserve(std::min<size_t>(limits_.max_objects, kReservedSlots));  // no growth per call
  }
  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  // A kept object (the last returned), or a new T() when none is kept.
  std::unique_ptr<T> Acquire() {
    {
      absl::MutexLock lock(&mu_);
      if (!kept_.empty()) {
        Kept kept = std::move(kept_.back());
        kept_.pop_back();
        bytes_ -= kept.bytes;
        return std::move(kept.object);
      }
    }
    return std::make_unique<T>();
  }

  // Recycles `object` and keeps it, or frees it when it holds more than max_object_bytes
  // or the pool is at one of its bounds. Null: nothing.
  void Release(std::unique_ptr<T> object) {
    if (object == nullptr) return;
    const size_t bytes = recycle_(*object);
    if (bytes > limits_.max_object_bytes) return;  // freed here
    absl::MutexLock lock(&mu_);
    if (kept_.size() < limits_.max_objects && bytes <= limits_.max_bytes - bytes_) {
      bytes_ += bytes;
      kept_.push_back({std::move(object), bytes});
    }
  }

  size_t kept_objects() const {
    absl::MutexLock lock(&mu_);
    return kept_.size();
  }
  size_t kept_bytes() const {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  struct Kept {
    std::unique_ptr<T> object;
    size_t bytes = 0;  // as the hook counted them on return
  };

  static constexpr size_t kReservedSlots = 4096;

  const ObjectPoolLimits limits_;
  const Recycle recycle_;
  mutable absl::Mutex mu_;
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_OBJECT_POOL_H_

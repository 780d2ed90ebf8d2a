// Gives memory freed after large requests and traffic spikes back to the operating system.
// glibc keeps freed heap pages in its arenas (the transport's receive buffers of a 16 MB
// request are many small chunks; so are those of a thousand calls of 100 KB queued at
// once), so without this the resident size stays at its peak although nothing holds them.
// A thread calls malloc_trim(0) once the cause has been quiet for kQuiet, and at most every
// kEvery while it lasts. Causes: a call of 1 MiB or more is done, or the wire bytes of the
// calls in flight, having reached 64 MiB, fall to an eighth of their peak (steady traffic
// never gets near: 10,000 calls/s of 50 KB answered in 5 ms hold 2.5 MB). RankerService
// and KServeService own one each; thread-safe.
#ifndef FUSERANK_SERVER_MEMORY_TRIMMER_H_
#define FUSERANK_SERVER_MEMORY_TRIMMER_H_

#include <atomic>
#include <cstddef>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fuserank::server {

class MemoryTrimmer {
 public:
  MemoryTrimmer();
  ~MemoryTrimmer();  // stops and joins the thread
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Calls of this many wire bytes or more in flight at once make a spike.
  static constexpr size_t kSpikeBytes = size_t{64} << 20;
  // A call done with a request this large (wire bytes and parsed values) is a cause alone.
  static constexpr size_t kLargeRequestBytes = size_t{1} << 20;

  // A call of `wire_bytes` was received.
  void CallReceived(size_t wire_bytes);
  // That call is done (the same `wire_bytes`); `held_bytes`: what it grew to, parsed values
  // included. Trims soon when it was large or ends a spike; returns whether it did so.
  bool CallDone(size_t wire_bytes, size_t held_bytes);
  // Trim soon.
  void Noted();
  // Trims done so far (for tests).
  int trims() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_noted_ ABSL_GUARDED_BY(mu_);
  absl::Time last_trim_ ABSL_GUARDED_BY(mu_);
  int trims_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> live_bytes_{0};  // wire bytes of the calls in flight
  std::atomic<size_t> peak_bytes_{0};  // their peak since the last spike ended
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MEMORY_TRIMMER_H_

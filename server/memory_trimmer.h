// Gives memory freed after large requests back to the operating system. glibc keeps freed
// heap pages in its arenas (the transport's receive buffers of a 16 MB request are many
// small chunks), so without this the resident size stays at its peak after a burst of
// large requests although nothing holds them. Noted() after each large request wakes one
// thread that calls malloc_trim(0) once the burst has been quiet for kQuiet, and at most
// every kEvery while it lasts. RankerService and KServeService own one each; thread-safe.
#ifndef FUSERANK_SERVER_MEMORY_TRIMMER_H_
#define FUSERANK_SERVER_MEMORY_TRIMMER_H_

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

  // A large request was freed (or is about to be): trim soon.
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
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MEMORY_TRIMMER_H_

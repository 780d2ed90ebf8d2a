// Destroys retired model versions on a thread of its own. The last holder of a retired
// version is often a request completing on that version's batcher worker; destroying the
// version there would make the Batcher join its own thread. Thread-safe.
#ifndef FUSERANK_SERVER_VERSION_REAPER_H_
#define FUSERANK_SERVER_VERSION_REAPER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fuserank::server {

struct ServedModel;

class VersionReaper {
 public:
  VersionReaper();
  ~VersionReaper();  // Stop()
  VersionReaper(const VersionReaper&) = delete;
  VersionReaper& operator=(const VersionReaper&) = delete;

  // Takes ownership of `version` and destroys it on the reaper thread; after Stop(), at
  // once on the caller's thread (REQUIRES then: not one of the version's own threads).
  void Retire(ServedModel* version);

  // Destroys everything queued, joins the thread. Idempotent.
  void Stop();

  // Versions destroyed so far.
  int64_t destroyed() const { return destroyed_.load(); }

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<ServedModel*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> destroyed_{0};
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_VERSION_REAPER_H_

// Watches the spec and weights files of every served model and reloads a model when its
// files change: every `interval` it stamps them (model_files.h: Restamp; a changed spec is
// read again, so the weights file it names now is the one stamped); a change is loaded once
// the files have stayed the same for one more interval, so a file still being written is
// not loaded half-written. A refused version is logged and not retried until the files
// change again (nor its spec read again: Restamp's `seen`). Replace files by renaming a complete
// file over the old one: the serving version maps its weights, and rewriting that file in place
// changes it under it. Start/Stop from one thread; the watch runs on a thread of its own.
#ifndef FUSERANK_SERVER_MODEL_WATCHER_H_
#define FUSERANK_SERVER_MODEL_WATCHER_H_

#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/model_files.h"
#include "server/served_models.h"

namespace fuserank::server {

class ModelWatcher {
 public:
  // `models` must outlive the watcher. Starts the watch thread.
  ModelWatcher(ServedModels* models, absl::Duration interval);
  ~ModelWatcher();  // Stop()
  ModelWatcher(const ModelWatcher&) = delete;
  ModelWatcher& operator=(const ModelWatcher&) = delete;

  // From now on no poll starts and a poll in progress starts no further reload (SIGTERM:
  // the drain must not start loading a model); does not wait. Idempotent.
  void RequestStop();
  // RequestStop(), then waits for the thread: a reload in progress finishes first.
  // Idempotent.
  void Stop();

  // One pass over every model (what the thread does each interval). Exposed for tests.
  void PollOnce();

  // Reloads started by the watch so far, and how many of them were refused.
  int reloads() const;
  int refused() const;

 private:
  struct Watch {
    std::optional<ModelFiles> pending;  // a change seen at the last poll, waiting to settle
    std::optional<ModelFiles> refused;  // files whose version was refused
  };

  void Loop();
  void Poll(const ModelHandle& current, Watch* watch);

  ServedModels* const models_;
  const absl::Duration interval_;

  mutable absl::Mutex poll_mu_;  // one poll at a time (the thread, or a test's PollOnce)
  std::map<std::string, Watch> watches_ ABSL_GUARDED_BY(poll_mu_);
  int reloads_ ABSL_GUARDED_BY(poll_mu_) = 0;
  int refused_ ABSL_GUARDED_BY(poll_mu_) = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_WATCHER_H_

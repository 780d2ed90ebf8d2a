#include "server/model_watcher.h"

#include <vector>

#include "spdlog/spdlog.h"

namespace fuserank::server {

ModelWatcher::ModelWatcher(ServedModels* models, absl::Duration interval)
    : models_(models), interval_(interval), thread_([this] { Loop(); }) {}

ModelWatcher::~ModelWatcher() { Stop(); }

void ModelWatcher::RequestStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void ModelWatcher::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

int ModelWatcher::reloads() const {
  absl::MutexLock lock(&poll_mu_);
  return reloads_;
}

int ModelWatcher::refused() const {
  absl::MutexLock lock(&poll_mu_);
  return refused_;
}

void ModelWatcher::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval_)) return;
    }
    PollOnce();
  }
}

void ModelWatcher::PollOnce() {
  absl::MutexLock lock(&poll_mu_);
  for (const ModelHandle& current : models_->Current()) {
    {
      absl::MutexLock stop_lock(&mu_);
      if (stopping_) return;
    }
    if (current->path.empty()) continue;  // built in memory: nothing to watch
    Poll(current, &watches_[current->name]);
  }
}

void ModelWatcher::Poll(const ModelHandle& current, Watch* watch) {
  // A spec the watch has read already (a pending change, a refused one) is not read again.
  std::vector<const ModelFiles*> seen;
  if (watch->pending.has_value()) seen.push_back(&*watch->pending);
  if (watch->refused.has_value()) seen.push_back(&*watch->refused);
  const ModelFiles now = Restamp(current->files, seen);
  if (now == current->files) {  // what is serving (a reload may have happened meanwhile)
    watch->pending.reset();
    return;
  }
  if (watch->refused.has_value() && now == *watch->refused) return;
  if (!watch->pending.has_value() || !(*watch->pending == now)) {
    watch->pending = now;  // changed; load it once it has stayed like this for an interval
    return;
  }
  watch->pending.reset();
  ++reloads_;
  spdlog::info("model '{}': {} changed, reloading", current->name,
               ChangedFiles(current->files, now));
  absl::StatusOr<ReloadResult> result =
      models_->Reload(current->name, current->path, current.get());
  if (absl::IsAborted(result.status())) return;  // reloaded meanwhile (the Admin RPC)
  if (result.ok()) {
    watch->refused.reset();
    spdlog::info("{}", result->message);
    return;
  }
  ++refused_;
  watch->refused = now;
  spdlog::error("{} (the file watch retries when the files change again)",
                std::string(result.status().message()));
}

}  // namespace fuserank::server

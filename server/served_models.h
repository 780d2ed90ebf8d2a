// The models a server serves, looked up by the request's `model` field, each a slot that
// holds its current version: the model with its decoder, backend and batcher. A reload
// builds a new version beside the current one and swaps it in atomically (read-copy-
// update); a request holds its version (ModelHandle) for its whole life, so it is decoded,
// scored and answered by one version, and a retired version is freed when its last holder
// lets go. Each version has its own hot-row cache; a reload carries the serving version's
// hot sets, hot-row version and counts over (hot_row_cache.h). Models are added before
// serving; after that every method is thread-safe.
#ifndef FUSERANK_SERVER_SERVED_MODELS_H_
#define FUSERANK_SERVER_SERVED_MODELS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/backend.h"
#include "engine/batcher.h"
#include "engine/hot_rows/hot_row_cache.h"
#include "engine/model.h"
#include "engine/remote_tier.h"
#include "server/metrics.h"
#include "server/model_budget.h"
#include "server/model_files.h"
#include "server/request_decoder.h"

namespace fuserank::server {

class GuardedBackend;
class VersionReaper;

// One version of one served model. Immutable once published (its hot-row cache changes
// inside, thread-safely). Members are destroyed batcher first (it calls into the backend),
// then the backend, then the hot-row cache the backend reads, then the remote tier that
// the cache's rebuilds fetch from.
struct ServedModel {
  // Its share of model.memory_budget_bytes, given back when the version is destroyed
  // (declared first: released after everything else has been freed).
  MemoryBudget::Reservation memory;
  std::string name;  // what requests put in `model`
  std::string path;  // the spec it was loaded from; "" for a model built in memory
  ModelFiles files;  // the files and their stamps as they were when loading began
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<RequestDecoder> decoder;
  // The storage: redis tier; null when the model has no such table. Declared before
  // hot_rows, so it outlives the hot-row cache: a periodic rebuild of a redis table runs
  // in RemoteTier::FetchRows until ~HotRowCache has stopped it. Outlives the backend.
  std::unique_ptr<engine::RemoteTier> remote;
  std::unique_ptr<engine::HotRowCache> hot_rows;  // never null once loaded; outlives the backend
  std::unique_ptr<engine::Backend> backend;
  // `backend` as the loader wraps it (guarded_backend.h), retired when a reload swaps this
  // version out; null for a backend built otherwise (tests).
  GuardedBackend* guard = nullptr;
  std::unique_ptr<engine::Batcher> batcher;

  // RankResponse.model_version of the responses this version scores.
  const std::string& version() const { return model->spec().version; }
  ~ServedModel();
};

// A request's hold on one version: keeps it (model, backend, batcher) alive.
using ModelHandle = std::shared_ptr<const ServedModel>;

// Builds a complete, warmed-up version of model `name` from the spec at `path`, to replace
// `previous` (null at the first load): its hot-row cache takes over `previous`'s state
// (engine::HotRowCache::Create and StartServing).
using VersionLoader = std::function<absl::StatusOr<std::unique_ptr<ServedModel>>(
    const std::string& name, const std::string& path, const ServedModel* previous)>;

// The checks that can refuse a version of model `name` from the spec at `path` before it is
// loaded (model_loader.h: PrepareModelVersion); run without holding any lock.
using VersionCheck = std::function<absl::Status(const std::string& name, const std::string& path)>;

struct ReloadResult {
  std::string model;             // the slot reloaded
  std::string version;           // serving now
  std::string previous_version;  // retired
  std::string message;           // for people and the log
};

class ServedModels {
 public:
  // `loader` builds versions for Load() and Reload(); `metrics` (may be null) gets
  // fuserank_model_info for every version published (and loses the series of a version a
  // reload retires). Both must outlive this object. `check` (may be null) runs before a
  // reload takes the model's reload lock: a version it refuses is refused at once, without
  // waiting for or blocking anything.
  explicit ServedModels(VersionLoader loader = nullptr, Metrics* metrics = nullptr,
                        VersionCheck check = nullptr);
  ~ServedModels();  // destroys the current versions; holders of handles must be gone
  ServedModels(const ServedModels&) = delete;
  ServedModels& operator=(const ServedModels&) = delete;

  // Before serving. `hook` (may be null) runs after every reload has swapped a new version
  // in, on the reloading thread, with no lock of this object held.
  void SetPublishHook(std::function<void()> hook) { publish_hook_ = std::move(hook); }

  // Before serving. Loads `path` with the loader and adds it as model `name` ("" = the
  // spec's own name).
  absl::Status Load(const std::string& name, const std::string& path, bool is_default);
  // Before serving. The first model added is the default until one is added with
  // `is_default`. ALREADY_EXISTS when the name is taken (NameTaken) or a second default is
  // given.
  absl::Status Add(std::unique_ptr<ServedModel> model, bool is_default = false);

  // The current version of `name`; "" -> the default model; an unknown name: NOT_FOUND
  // naming the loaded models, and the request field (`field`: "model" in RankRequest and
  // the admin calls, "model_name" in ModelInferRequest) to leave empty for the default.
  // Hold the handle until the response is sent.
  absl::StatusOr<ModelHandle> Acquire(absl::string_view name,
                                      absl::string_view field = "model") const;

  // Loads a new version of `name` ("" = default) from `path` ("" = its current spec),
  // warms it up, then swaps it in. On failure the current version keeps serving and the
  // error says why: INVALID_ARGUMENT (a bad spec or weights) or FAILED_PRECONDITION (a
  // file that cannot be read, a backend that cannot be built, a failed warm-up);
  // NOT_FOUND for an unknown name, UNAVAILABLE after ShutdownBatchers(); a version that
  // `check` refuses is refused before the reload lock is taken; with `expected`
  // set, ABORTED (nothing loaded) when another version has replaced it meanwhile. Reloads
  // of one model run one at a time; requests are served throughout. While it loads, the
  // serving version's periodic hot-row rebuilds pause (they resume if it is refused);
  // ChangeServingVersion goes on, on the serving version, and the new version takes its
  // hot sets over just before the swap (ChangeServingVersion waits only for that).
  absl::StatusOr<ReloadResult> Reload(absl::string_view name, const std::string& path,
                                      const ServedModel* expected = nullptr);

  // Runs `change` (e.g. a hot-set swap) on the current version of `name` ("" = default),
  // never during a reload's hand-over: a change made while a new version loads is taken
  // over by that version before it is swapped in (engine::HotRowCache::CatchUp), so it
  // is never lost, and the change does not wait for the load. Returns `change`'s status;
  // NOT_FOUND as Acquire.
  absl::Status ChangeServingVersion(absl::string_view name,
                                    absl::FunctionRef<absl::Status(const ServedModel&)> change);

  // The current version of every model, in the order they were added.
  std::vector<ModelHandle> Current() const;
  const std::string& default_name() const;
  // Retired versions destroyed so far (freed once their last request finished).
  int64_t versions_freed() const;

  // Requests waiting in every current version's batcher queue.
  int QueueDepth() const;
  // Stops every batcher (queued requests complete, new ones get UNAVAILABLE) and refuses
  // further reloads.
  void ShutdownBatchers();

 private:
  struct Slot;

  // Reload() but the publish hook.
  absl::StatusOr<ReloadResult> Swap(absl::string_view name, const std::string& path,
                                    const ServedModel* expected);
  // The slot of `name` ("" = default) or NOT_FOUND naming the loaded models and saying
  // to leave the request's `field` empty for the default.
  absl::StatusOr<Slot*> FindSlot(absl::string_view name, absl::string_view field = "model") const;
  // Shares `version` with a deleter that hands it to the reaper.
  std::shared_ptr<ServedModel> Share(std::unique_ptr<ServedModel> version) const;
  void RecordInfo(const ServedModel& version) const;

  // The refusal of a version of `slot` from `from`, with the version that keeps serving.
  static absl::Status Refused(const Slot& slot, const std::string& from, const ServedModel& serving,
                              const absl::Status& why);

  VersionLoader loader_;
  VersionCheck check_;
  std::function<void()> publish_hook_;
  Metrics* const metrics_;
  std::shared_ptr<VersionReaper> reaper_;
  std::vector<std::unique_ptr<Slot>> slots_;  // fixed once serving
  absl::flat_hash_map<std::string, Slot*> by_name_;
  size_t default_ = 0;
  bool default_marked_ = false;
};

// The name a model is served under: the configured `name`, else its spec's own.
inline std::string ServedName(const std::string& name, const engine::ModelSpec& spec) {
  return name.empty() ? spec.name : name;
}

// ALREADY_EXISTS for a second model served as `name` (ServedModels::Add, --check-config).
absl::Status NameTaken(absl::string_view name);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_SERVED_MODELS_H_

// Builds one servable version of a model, at start and on every reload: checks what the
// files and the spec imply before reading them (PrepareModelVersion: paths confined to the
// model roots, regular files, sizes, the memory budget), loads and validates the spec and
// weights, creates the version's hot-row cache (hot_row_cache.h)
// and its own backend (engine::CreateBackend) reading it, warms it up (model_warmup.h),
// then its decoder and batcher. Nothing is shared with other versions, so a version can
// serve beside the one it replaces; the hot-row cache takes over the replaced version's
// hot sets, version and counts.
// Pure functions of their arguments; thread-safe.
#ifndef FUSERANK_SERVER_MODEL_LOADER_H_
#define FUSERANK_SERVER_MODEL_LOADER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/backend_factory.h"
#include "engine/batcher.h"
#include "engine/hot_rows/hot_row_cache.h"
#include "engine/model.h"
#include "engine/model_memory.h"
#include "engine/model_spec.h"
#include "engine/remote_tier.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/model_budget.h"
#include "server/model_roots.h"
#include "server/request_decoder.h"
#include "server/served_models.h"

namespace fuserank::server {

// Creates a version's backend for `model` on `device` (engine::CreateBackend's contract).
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<engine::Backend>>(
    std::shared_ptr<const engine::Model> model, engine::DeviceChoice device,
    const engine::BackendOptions& options)>;

struct ModelLoaderOptions {
  engine::DeviceChoice device = engine::DeviceChoice::kAuto;  // engine.device
  // engine.on_device_failure: what a version does once its backend's device failed
  // (guarded_backend.h: every version's backend is wrapped in a GuardedBackend).
  OnDeviceFailure on_device_failure = OnDeviceFailure::kFail;
  Metrics* metrics = nullptr;              // counts device failures; may be null
  std::function<void()> on_device_failed;  // after a version reacted to one; may be null
  // Builds each version's backend; null: engine::CreateBackend. (Tests inject backends.)
  BackendFactory create_backend;
  engine::BackendOptions backend;
  DecodeLimits limits;
  engine::BatcherOptions batcher;
  engine::HotRowCacheOptions cache;  // backend.hot_rows and sample_accesses are set per version
  bool warm_up = true;  // touch the tables' pages and run synthetic batches before serving
  // model.roots: where specs and weights may be loaded from; null: anywhere.
  std::shared_ptr<const ModelRoots> roots;
  // model.memory_budget_bytes: shared by every version; null: no budget.
  std::shared_ptr<MemoryBudget> budget;
  // remote.*: a version with storage: redis tables gets a RemoteTier of its own.
  engine::RemoteTierOptions remote;
};

// What the checks before a load found: the spec (read from its resolved path, weights path
// resolved and confined) and the memory the version will take.
struct PreparedVersion {
  std::string spec_path;   // resolved
  engine::ModelSpec spec;  // weights_path resolved too
  // The weights path as the file watch stamps it (model_files.h: WeightsAsNamed): under the
  // spec path given when that is the directory read from, so that a directory symlink
  // switched later shows up as a change.
  std::string weights_as_named;
  uint64_t weights_bytes = 0;
  engine::ModelMemory memory;
};

// The checks that refuse a version before anything but its spec (at most
// engine::kMaxModelSpecBytes) and its weights' header (the 8-byte length, then the header
// itself for the tables a load copies again) is read: both paths
// inside options.roots, both regular files (a FIFO, device or directory is refused at
// once), the weights no larger than their header and the spec's tensors take, and the memory
// estimate within what options.budget has left. Fast and blocking nothing: ServedModels runs it
// before taking a model's reload lock.
absl::StatusOr<PreparedVersion> PrepareModelVersion(const std::string& name,
                                                    const std::string& spec_path,
                                                    const ModelLoaderOptions& options);

// A version's files checked, its memory reserved and its spec and weights loaded and
// validated: everything of a load but the backend (what --check-config does for each
// configured model).
struct LoadedFiles {
  PreparedVersion prepared;
  MemoryBudget::Reservation memory;  // empty without options.budget
  std::shared_ptr<const engine::Model> model;
};

// PrepareModelVersion, then the memory reserved in options.budget, then engine::Model::Load
// (bounded by the size checked). `files` (may be null) gets the stamps of the spec (taken
// first) and of the weights (taken before they are read), so that a file replaced during
// the load shows up as a change.
absl::StatusOr<LoadedFiles> LoadModelFiles(const std::string& name, const std::string& spec_path,
                                           const ModelLoaderOptions& options, ModelFiles* files);

// The options that the engine.*, cache.*, server.* and model.* keys of `config` give: the
// model roots (model.roots, or the configured models' directories) and a memory budget
// (model.memory_budget_bytes) shared by every version loaded with them.
ModelLoaderOptions LoaderOptionsFrom(const Config& config);

// Version of model `name` ("" = the spec's own name) from the spec at `spec_path`, to
// replace `previous` (null: the first version): LoadModelFiles, then ServeModel. Errors keep the
// loader's code (INVALID_ARGUMENT for a bad spec or tensor) and name the model.
absl::StatusOr<std::unique_ptr<ServedModel>> LoadModelVersion(
    const std::string& name, const std::string& spec_path, const ModelLoaderOptions& options,
    const ServedModel* previous = nullptr);

// The same for a model already in memory (no files: it cannot be reloaded from its path).
absl::StatusOr<std::unique_ptr<ServedModel>> ServeModel(const std::string& name,
                                                        std::shared_ptr<const engine::Model> model,
                                                        const ModelLoaderOptions& options,
                                                        const ServedModel* previous = nullptr);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_LOADER_H_

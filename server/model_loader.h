// Builds one servable version of a model, at start and on every reload: loads and
// validates the spec and weights, creates the version's hot-row cache (hot_row_cache.h)
// and its own backend (engine::CreateBackend) reading it, warms it up (model_warmup.h),
// then its decoder and batcher. Nothing is shared with other versions, so a version can
// serve beside the one it replaces; the hot-row cache takes over the replaced version's
// hot sets, version and counts.
// Pure functions of their arguments; thread-safe.
#ifndef FUSERANK_SERVER_MODEL_LOADER_H_
#define FUSERANK_SERVER_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/backend_factory.h"
#include "engine/batcher.h"
#include "engine/model.h"
#include "server/config.h"
#include "server/hot_row_cache.h"
#include "server/request_decoder.h"
#include "server/served_models.h"

namespace fuserank::server {

struct ModelLoaderOptions {
  engine::DeviceChoice device = engine::DeviceChoice::kAuto;  // engine.device
  engine::BackendOptions backend;
  DecodeLimits limits;
  engine::BatcherOptions batcher;
  HotRowCacheOptions cache;  // backend.hot_rows and sample_accesses are set per version
  bool warm_up = true;       // touch the tables' pages and run synthetic batches before serving
};

// The options that the engine.*, cache.* and server.* keys of `config` give.
ModelLoaderOptions LoaderOptionsFrom(const Config& config);

// Version of model `name` ("" = the spec's own name) from the spec at `spec_path`, to
// replace `previous` (null: the first version). Errors keep the loader's code
// (INVALID_ARGUMENT for a bad spec or tensor) and name the model.
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
